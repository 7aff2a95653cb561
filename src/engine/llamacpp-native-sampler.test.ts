// The llama.cpp executor with `sampler: "llama.cpp"` on a real GGUF: greedy requests give exactly what
// Arbor's sampler gives; at temperature 1 each token's logprob is its exact log-probability under the
// whole distribution, the draws follow that distribution, a seed repeats its tokens and a continuation
// continues them; requests llama.cpp cannot sample exactly still go through Arbor's sampler.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { stopTokenIds } from "../model/chat-template.js";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import type { GenerateRequest, GenerateResult } from "./executor.js";
import { evaluateTokens, openLlamaContext } from "./llama-context.js";
import { NextTokenReader } from "./llama-next-token-reader.js";
import { LlamaCppExecutor } from "./llamacpp-executor.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";
import { createEngineServer } from "./server.js";

const vocab = new Vocab();
const STOPS = stopTokenIds(vocab);
const PROMPT = [vocab.bosId, ...vocab.encode("12*7=")];
const N = 24;
const CONTEXT = 128;

let dir: string;
let modelPath: string;
let native: LlamaCppExecutor;
let arbor: LlamaCppExecutor;
let ref: { model: LlamaModel; context: LlamaContext; seq: LlamaContextSequence };

type Request = Omit<GenerateRequest, "promptTokenIds" | "rng">;
const T1: Request = { maxTokens: N, temperature: 1, topP: 1, topLogprobs: 0 };

function run(e: LlamaCppExecutor, prompt: number[], r: Request, seed: number): Promise<GenerateResult> {
  return e.generate({ ...r, promptTokenIds: prompt, rng: PositionKeyedRng.fromSeed(seed) });
}

/** llama.cpp's probability of each of `tokens` after `prompt` ‖ the tokens before it (controlledEvaluate's Map). */
async function probabilities(prompt: number[], tokens: number[]): Promise<number[]> {
  await ref.seq.clearHistory();
  const out: number[] = [];
  let input = prompt;
  for (const id of tokens) {
    const map = (await evaluateTokens(ref.seq, input, true)) as Map<number, number>;
    out.push(map.get(id) ?? 0);
    input = [id];
  }
  return out;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-native-"));
  modelPath = ensurePolicy(dir, { seed: 11, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 }).path;
  native = await LlamaCppExecutor.load({ modelPath, sequences: 4, contextSize: CONTEXT, maxWaiting: 400, stopTokenIds: STOPS, sampler: "llama.cpp" });
  arbor = await LlamaCppExecutor.load({ modelPath, sequences: 1, contextSize: CONTEXT, maxWaiting: 8, stopTokenIds: STOPS });
  const { model, context } = await openLlamaContext({ modelPath, sequences: 1, contextSize: CONTEXT });
  ref = { model, context, seq: context.getSequence() };
}, 60_000);

afterAll(async () => {
  await native?.close();
  await arbor?.close();
  await ref?.context.dispose();
  await ref?.model.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("LlamaCppExecutor with sampler llama.cpp", () => {
  it("greedy: the same tokens and the same logprobs, bit for bit, as Arbor's sampler", async () => {
    const greedy: Request = { maxTokens: N, temperature: 0, topP: 1, topLogprobs: 0 };
    const got = await run(native, PROMPT, greedy, 1);
    const want = await run(arbor, PROMPT, greedy, 1);
    expect(got.tokens.length).toBeGreaterThan(0);
    expect(got.tokens).toEqual(want.tokens);
    expect(got.finishReason).toBe(want.finishReason);
  });

  it("temperature 1: every logprob is the token's exact log-probability under llama.cpp's whole distribution", async () => {
    const got = await run(native, PROMPT, T1, 7);
    expect(got.tokens.length).toBeGreaterThan(0);
    const ids = got.tokens.map((t) => t.id);
    const p = await probabilities(PROMPT, ids);
    got.tokens.forEach((t, i) => {
      expect(p[i]).toBeGreaterThan(0);
      expect(Math.abs(t.logprob - Math.log(p[i] as number))).toBeLessThan(1e-6);
      expect(t.top).toEqual([]);
    });
  });

  it("temperature 1: a seed repeats its tokens, a continuation continues them, another seed draws others", async () => {
    const whole = await run(native, PROMPT, T1, 21);
    const again = await run(native, PROMPT, T1, 21);
    expect(again.tokens.map((t) => t.id)).toEqual(whole.tokens.map((t) => t.id));
    const k = 9;
    const head = whole.tokens.slice(0, k).map((t) => t.id);
    const rest = await run(native, [...PROMPT, ...head], { ...T1, maxTokens: N - k }, 21);
    expect(rest.tokens.map((t) => t.id)).toEqual(whole.tokens.slice(k).map((t) => t.id));
    const other = await run(native, PROMPT, T1, 22);
    expect(other.tokens.map((t) => t.id)).not.toEqual(whole.tokens.map((t) => t.id));
  });

  it("temperature 1: the draws follow the distribution (the likeliest third of the first token's mass, within 4 SE)", async () => {
    await ref.seq.clearHistory();
    const dist = [...((await evaluateTokens(ref.seq, PROMPT, true)) as Map<number, number>)].sort((a, b) => b[1] - a[1]);
    // The likeliest tokens up to a third of the mass (this random policy spreads it wide).
    let k = 0;
    let mass = 0;
    while (mass < 1 / 3) mass += (dist[k++] as [number, number])[1];
    const top = new Set(dist.slice(0, k).map(([id]) => id));
    const n = 300;
    const first = await Promise.all(Array.from({ length: n }, (_, seed) => run(native, PROMPT, { ...T1, maxTokens: 1 }, seed)));
    const hits = first.filter((r) => top.has(r.tokens[0]?.id as number)).length;
    const se = Math.sqrt(n * mass * (1 - mass));
    expect(k).toBeLessThan(dist.length / 2);
    expect(Math.abs(hits - n * mass)).toBeLessThan(4 * se);
  });

  it("requests llama.cpp cannot sample exactly (top-p, top logprobs, other temperatures) go through Arbor's sampler", async () => {
    for (const r of [
      { maxTokens: N, temperature: 0.9, topP: 0.95, topLogprobs: 0 },
      { maxTokens: N, temperature: 1, topP: 0.9, topLogprobs: 0 },
      { maxTokens: N, temperature: 1, topP: 1, topLogprobs: 2 },
    ]) {
      expect(await run(native, PROMPT, r, 5)).toEqual(await run(arbor, PROMPT, r, 5));
    }
  });

  it("an engine server with sampler llama.cpp serves it: a seeded completion's tokens and logprobs are the executor's", async () => {
    const server = await createEngineServer({ name: "n", modelPath, policyVersion: 1, sequences: 1, contextSize: CONTEXT, maxWaiting: 4, executorKind: "llamacpp", sampler: "llama.cpp" });
    try {
      const body = { model: "arbor-tiny", prompt: PROMPT, max_tokens: 8, temperature: 1, top_p: 1, seed: 42, logprobs: 0, return_token_ids: true };
      const ask = async () => (await server.app.inject({ method: "POST", url: "/v1/completions", payload: body })).json();
      const a = await ask();
      const b = await ask();
      const want = await run(native, PROMPT, { ...T1, maxTokens: 8 }, 42);
      // (The answer leaves out a stop token the generation ended with.)
      const n = a.choices[0].token_ids.length;
      expect(n).toBeGreaterThan(0);
      expect(a.choices[0].token_ids).toEqual(want.tokens.slice(0, n).map((t) => t.id));
      expect(a.choices[0].logprobs.token_logprobs).toEqual(want.tokens.slice(0, n).map((t) => t.logprob));
      expect(b.choices[0].token_ids).toEqual(a.choices[0].token_ids);
    } finally {
      await server.close();
    }
  });

  it("refuses an unknown sampler, and a reader refuses the other mode's calls", async () => {
    await expect(LlamaCppExecutor.load({ modelPath, sequences: 1, contextSize: CONTEXT, maxWaiting: 1, sampler: "vllm" as "arbor" })).rejects.toThrow(
      /sampler must be "arbor" or "llama.cpp", got "vllm"/,
    );
    const reader = new NextTokenReader(ref.seq, () => 1, { temperature: 1 });
    try {
      await expect(reader.next([5])).rejects.toThrow(ArborError);
      await expect(reader.sampleNext([5], -1)).rejects.toThrow(/seed must be an integer in 0\.\.2\^32-1, got -1/);
    } finally {
      reader.dispose();
    }
    const plain = new NextTokenReader(ref.seq);
    try {
      await expect(plain.sampleAfter(5, 0)).rejects.toThrow(/made without native sampling/);
    } finally {
      plain.dispose();
    }
  });
});
