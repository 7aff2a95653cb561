// The OpenAI stream chunks of a token-path answer, built by the gateway from the engine's token
// deltas and the text decoded for them: chat.completion.chunk (role chunk first, prompt ids on it)
// or text_completion chunks in vLLM's shapes (token_ids, prompt_token_ids, policy_version), the
// finish reason last, then a usage chunk when asked. A chat answer is read as it arrives with the
// backend's parsers (answer-plan.ts, the reader the non-streamed answer uses): reasoning goes out
// as `delta.reasoning_content`, and each completed tool call as vLLM streams one — a delta
// `{index, id, type: "function", function: {name, arguments: ""}}` followed by
// `{index, function: {arguments}}`. Pure: the caller decodes and writes.
import type { GenerateResult } from "../../backends/backend.js";
import type { Endpoint } from "../openai-request.js";
import type { StreamChunk } from "../surfaces/stream-surface.js";
import { AnswerReader, type AnswerPlan } from "./answer-plan.js";
import { stopReasonOf, toolCallIdPrefix, usageOf } from "./token-response.js";

export interface TokenChunksOptions {
  endpoint: Endpoint;
  /** The call id; the chunks' id derives from it as the non-streamed answer's does. */
  callId: string;
  /** Unix seconds. */
  created: number;
  model: string;
  promptTokenIds: number[];
  /** Per-token logprobs in the chunks (the client still only sees them when it asked). */
  logprobs: boolean;
  /** `stream_options.include_usage`: a last chunk with usage and no choices. */
  includeUsage: boolean;
  /** How a chat answer is read (tools, reasoning); absent: plain text. */
  answer?: AnswerPlan;
  /** The client's stops by token id: the last chunk's `stop_reason` (token-response.ts stopReasonOf). */
  stops?: ReadonlyMap<number, string | number>;
}

/** One delta as decoded: its ids and logprobs, the text it adds, and (with logprobs) each token's text. */
export interface DecodedDelta {
  ids: number[];
  logprobs: number[];
  text: string;
  tokenTexts?: string[];
}

/** JSON has no -Infinity; vLLM reports impossible tokens as -9999. */
const jsonLogprob = (lp: number): number => (Number.isFinite(lp) ? lp : -9999);

/** Builds one answer's chunks; {@link start}, {@link delta} per decoded delta, {@link finish} once. */
export class TokenChunks {
  private readonly reader: AnswerReader | undefined;
  private textOffset = 0;
  private promptSent = false;

  constructor(private readonly o: TokenChunksOptions) {
    this.reader = o.answer && (o.answer.tools || o.answer.reasoning) ? new AnswerReader(o.answer, toolCallIdPrefix(o.callId)) : undefined;
  }

  /** Chunks before any token: chat's role chunk carrying the prompt ids; none for completions. */
  start(policyVersion: number | null): StreamChunk[] {
    if (this.o.endpoint !== "chat") return [];
    this.promptSent = true;
    return [{ ...this.envelope(policyVersion, [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]), prompt_token_ids: this.o.promptTokenIds }];
  }

  /** The chunk of one decoded delta (none when it carries neither tokens nor text). */
  delta(d: DecodedDelta, policyVersion: number | null): StreamChunk[] {
    if (d.ids.length === 0 && d.text === "") return [];
    return [this.chunk(d, null, policyVersion)];
  }

  /** The last content chunk (the rest of the text, the finish reason) and the usage chunk. */
  finish(d: DecodedDelta, result: GenerateResult): StreamChunk[] {
    const last = this.chunk(d, result.finishReason, result.policyVersion);
    (last.choices as Record<string, unknown>[])[0]!.stop_reason = stopReasonOf(result, this.o.stops);
    const out = [last];
    if (this.o.includeUsage) out.push({ ...this.envelope(result.policyVersion, []), usage: usageOf(this.o.promptTokenIds.length, result, this.o.answer) });
    return out;
  }

  private chunk(d: DecodedDelta, finishReason: GenerateResult["finishReason"] | null, policyVersion: number | null): StreamChunk {
    const choice: Record<string, unknown> = { index: 0 };
    const texts = d.tokenTexts ?? [];
    if (this.o.endpoint === "chat") {
      const delta: Record<string, unknown> = { content: d.text };
      let finish: string | null = finishReason;
      if (this.reader) {
        const got = this.reader.push(d.text);
        const rest = finishReason !== null ? this.reader.flush() : { reasoning: "", content: "", calls: [] };
        const calls = [...got.calls, ...rest.calls];
        const before = this.reader.callCount - calls.length;
        const reasoning = got.reasoning + rest.reasoning;
        if (reasoning !== "") delta.reasoning_content = reasoning;
        delta.content = got.content + rest.content;
        if (calls.length > 0) {
          // vLLM's shape: the call's header (id, type, name, empty arguments), then its arguments.
          delta.tool_calls = calls.flatMap((c, i) => [
            { index: before + i, id: c.id, type: "function", function: { name: c.function.name, arguments: "" } },
            { index: before + i, function: { arguments: c.function.arguments } },
          ]);
        }
        if (finishReason === "stop" && this.reader.callCount > 0) finish = "tool_calls";
      }
      choice.delta = delta;
      choice.logprobs = this.o.logprobs
        ? {
            content: d.ids.map((_, i) => {
              const token = texts[i] ?? "";
              return { token, logprob: jsonLogprob(d.logprobs[i] as number), bytes: [...Buffer.from(token, "utf8")], top_logprobs: [] };
            }),
          }
        : null;
      choice.finish_reason = finish;
    } else {
      choice.text = d.text;
      if (this.o.logprobs) {
        const offsets: number[] = [];
        for (const t of texts) {
          offsets.push(this.textOffset);
          this.textOffset += t.length;
        }
        choice.logprobs = {
          tokens: texts,
          token_logprobs: d.logprobs.map(jsonLogprob),
          top_logprobs: texts.map((t, i) => ({ [t]: jsonLogprob(d.logprobs[i] as number) })),
          text_offset: offsets,
        };
      } else {
        choice.logprobs = null;
      }
      choice.finish_reason = finishReason;
      if (!this.promptSent) choice.prompt_token_ids = this.o.promptTokenIds;
      this.promptSent = true;
    }
    choice.token_ids = d.ids;
    return this.envelope(policyVersion, [choice]);
  }

  private envelope(policyVersion: number | null, choices: unknown[]): StreamChunk {
    const hex = this.o.callId.replaceAll("-", "");
    return {
      id: this.o.endpoint === "chat" ? `chatcmpl-${hex}` : `cmpl-${hex}`,
      object: this.o.endpoint === "chat" ? "chat.completion.chunk" : "text_completion",
      created: this.o.created,
      model: this.o.model,
      choices,
      ...(policyVersion !== null ? { policy_version: policyVersion } : {}),
    };
  }
}

/** A chunk as the client may see it: token ids and logprobs only when it asked for them. */
export function visibleChunk(chunk: StreamChunk, want: { logprobs: boolean; tokenIds: boolean }): StreamChunk {
  const out: StreamChunk = { ...chunk };
  if (!want.tokenIds) delete out.prompt_token_ids;
  const choices = chunk.choices as Record<string, unknown>[];
  out.choices = choices.map((c) => {
    const v = { ...c };
    if (!want.logprobs) v.logprobs = null;
    if (!want.tokenIds) {
      delete v.token_ids;
      delete v.prompt_token_ids;
    }
    return v;
  });
  return out;
}
