import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { stopTokenIds } from "../../model/chat-template.js";
import { Vocab } from "../../model/vocab.js";
import type { EngineFinishReason, GenerateResult } from "../executor.js";
import { completionLogprobs, outputText } from "../openai-responses.js";
import { IncrementalText, StreamChunker, type StreamEvent, type StreamEventChoice, type StreamSpec } from "./stream-chunks.js";

const vocab = new Vocab();
const stops = new Set(stopTokenIds(vocab));

function spec(kind: "chat" | "completion", maxTokens: number, extra: Partial<StreamSpec> = {}): StreamSpec {
  return {
    kind,
    vocab,
    id: "x",
    created: 1,
    model: "m",
    policyVersion: 4,
    promptTokenIds: [vocab.bosId, 40, 41],
    returnTokenIds: true,
    logprobs: true,
    includeUsage: true,
    continuousUsage: false,
    stopTokenIds: stops,
    maxTokens,
    ...extra,
  };
}

/** Feed a result through a chunker the way the server does (onToken for each, then finish). */
function streamOf(s: StreamSpec, result: GenerateResult, callOnToken = true): StreamEvent[] {
  const c = new StreamChunker(s);
  const out = [...c.start()];
  if (callOnToken) for (const t of result.tokens) out.push(...c.token(t));
  out.push(...c.finish(result));
  return out as unknown as StreamEvent[];
}

/** The one choice of a content chunk. */
function only(e: StreamEvent): StreamEventChoice {
  expect(e.choices).toHaveLength(1);
  return e.choices[0]!;
}

const tokenArb = fc.integer({ min: 3, max: vocab.size - 1 }).filter((id) => !stops.has(id));
const resultArb = fc
  .tuple(fc.array(tokenArb, { maxLength: 20 }), fc.constantFrom<EngineFinishReason>("stop", "length", "abort"), fc.constantFrom(...stops))
  .map(([ids, reason, stopId]): GenerateResult => {
    const tokens = ids.map((id) => ({ id, logprob: -id / 1000, top: [{ id: 5, logprob: -0.1 }] }));
    if (reason === "stop") tokens.push({ id: stopId, logprob: -0.2, top: [{ id: 5, logprob: -0.1 }] });
    return reason === "stop" ? { tokens, finishReason: reason, stopTokenId: stopId } : { tokens, finishReason: reason };
  });

describe("IncrementalText", () => {
  it("holds a multi-byte character back until its last byte arrives", () => {
    const ids = vocab.encode("é!");
    expect(ids).toHaveLength(3);
    const t = new IncrementalText(vocab);
    expect(t.push(ids[0]!)).toBe("");
    expect(t.push(ids[1]!)).toBe("é");
    expect(t.push(ids[2]!)).toBe("!");
  });
});

describe("StreamChunker", () => {
  it("streams exactly the non-streaming text, token ids and logprobs (chat and completions)", () => {
    fc.assert(
      fc.property(resultArb, fc.boolean(), (result, callOnToken) => {
        const maxTokens = result.finishReason === "length" ? result.tokens.length : 64;
        for (const kind of ["chat", "completion"] as const) {
          const chunks = streamOf(spec(kind, Math.max(1, maxTokens)), result, callOnToken);
          const usageChunk = chunks.at(-1)!;
          expect(usageChunk.choices).toEqual([]);
          expect(usageChunk.usage?.completion_tokens).toBe(result.tokens.length);
          const content = chunks.slice(0, -1);
          for (const c of chunks) expect(c.policy_version).toBe(4);
          const choices = content.map(only);
          const finals = choices.filter((c) => c.finish_reason !== null);
          expect(finals).toHaveLength(1);
          expect(choices.at(-1)!.finish_reason).toBe(result.finishReason);
          const text = choices.map((c) => (kind === "chat" ? c.delta?.content : c.text)).join("");
          expect(text).toBe(outputText(vocab, result));
          expect(choices.flatMap((c) => c.token_ids ?? [])).toEqual(result.tokens.map((t) => t.id));
          if (kind === "chat") {
            expect(choices[0]?.delta?.role).toBe("assistant");
            expect(content[0]!.prompt_token_ids).toEqual([vocab.bosId, 40, 41]);
            const lps = choices.flatMap((c) => c.logprobs?.content ?? []);
            expect(lps.map((l: { logprob: number }) => l.logprob)).toEqual(result.tokens.map((t) => t.logprob));
          } else {
            expect(choices[0]?.prompt_token_ids).toEqual([vocab.bosId, 40, 41]);
            expect(choices.slice(1).every((c) => c.prompt_token_ids === undefined)).toBe(true);
            const whole = completionLogprobs(vocab, result);
            expect(choices.flatMap((c) => c.logprobs?.tokens ?? [])).toEqual(whole.tokens);
            expect(choices.flatMap((c) => c.logprobs?.token_logprobs ?? [])).toEqual(whole.token_logprobs);
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it("sends a token's chunk as soon as it is sampled, except a possible last token", () => {
    const c = new StreamChunker(spec("chat", 3, { includeUsage: false, returnTokenIds: false, logprobs: false }));
    c.start();
    const tok = (id: number) => ({ id, logprob: -1, top: [] });
    expect(c.token(tok(40))).toHaveLength(1);
    expect(c.token(tok(stops.values().next().value!))).toEqual([]);
    const fin = c.finish({ tokens: [tok(40), tok(2)], finishReason: "stop", stopTokenId: 2 }) as unknown as StreamEvent[];
    expect(fin).toHaveLength(1);
    expect(fin[0]!.choices[0]).toMatchObject({ delta: { content: "" }, finish_reason: "stop", stop_reason: null });
    expect(fin[0]!.choices[0]!.token_ids).toBeUndefined();
  });

  it("reports usage on every chunk with continuous_usage_stats", () => {
    const result: GenerateResult = { tokens: [40, 41].map((id) => ({ id, logprob: -1, top: [] })), finishReason: "length" };
    const chunks = streamOf(spec("completion", 2, { includeUsage: false, continuousUsage: true }), result);
    expect(chunks.map((c) => c.usage?.completion_tokens)).toEqual([1, 2]);
  });
});
