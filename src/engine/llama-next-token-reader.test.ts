// The executor's fast path on a real GGUF: the NextTokenReader reads the same distributions as
// node-llama-cpp's controlled evaluation, and the executor's tokens and logprobs equal the reference
// computation's (controlledEvaluate's Map, then a full sort and a full log-softmax in JS), alone and
// with several sequences batched into one decode.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { stopTokenIds } from "../model/chat-template.js";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import { referenceSampleToken } from "../testing/reference-sampler.js";
import type { GenerateRequest, GenerateResult } from "./executor.js";
import { evaluateTokens, openLlamaContext } from "./llama-context.js";
import { NextTokenReader } from "./llama-next-token-reader.js";
import { LlamaCppExecutor } from "./llamacpp-executor.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";
import { StopRule, type SampledToken } from "./sampling.js";

const vocab = new Vocab();
const STOPS = stopTokenIds(vocab);
const PROMPTS = ["3+4=", "The answer is", "12*7", "calc"].map((t) => [vocab.bosId, ...vocab.encode(t)]);
const N = 24;
const CONTEXT = 128;

let dir: string;
let modelPath: string;
let executor: LlamaCppExecutor;
let ref: { model: LlamaModel; context: LlamaContext; seq: LlamaContextSequence };

type Request = Omit<GenerateRequest, "promptTokenIds" | "rng"> & { seed: number };

/**
 * The same generation computed the way the executor computed it before its fast path: each step
 * node-llama-cpp's controlledEvaluate (a Map of the whole distribution), then the reference sampler.
 */
async function reference(prompt: number[], r: Request): Promise<SampledToken[]> {
  const { seq } = ref;
  await seq.clearHistory();
  const rng = PositionKeyedRng.fromSeed(r.seed);
  const rule = new StopRule(STOPS, r.controls ?? {});
  const base = { temperature: r.temperature, topP: r.topP, topLogprobs: r.topLogprobs, ...(r.controls?.logitBias ? { logitBias: r.controls.logitBias } : {}) };
  const out: SampledToken[] = [];
  let input = prompt;
  for (;;) {
    const probs = (await evaluateTokens(seq, input, true)) as Map<number, number>;
    const suppress = rule.suppressAt(out.length);
    const tok = referenceSampleToken(probs, suppress ? { ...base, suppress } : base, rng, prompt.length + out.length);
    out.push(tok);
    if (rule.stopsAt(tok.id, out.length) || out.length >= r.maxTokens) return out;
    input = [tok.id];
  }
}

function run(prompt: number[], r: Request): Promise<GenerateResult> {
  const { seed, ...rest } = r;
  return executor.generate({ ...rest, promptTokenIds: prompt, rng: PositionKeyedRng.fromSeed(seed) });
}

/** `exact`: bit-identical (the same float32 distribution, the same arithmetic on it). */
function expectSame(got: GenerateResult, want: SampledToken[], exact: boolean): void {
  expect(got.tokens.map((t) => t.id)).toEqual(want.map((t) => t.id));
  if (exact) {
    expect(got.tokens.map((t) => t.logprob)).toEqual(want.map((t) => t.logprob));
    expect(got.tokens.map((t) => t.top)).toEqual(want.map((t) => t.top));
    return;
  }
  got.tokens.forEach((t, i) => expect(Math.abs(t.logprob - (want[i]?.logprob as number))).toBeLessThan(1e-5));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-reader-"));
  modelPath = ensurePolicy(dir, { seed: 11, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 }).path;
  executor = await LlamaCppExecutor.load({ modelPath, sequences: 4, contextSize: CONTEXT, maxWaiting: 8, stopTokenIds: STOPS });
  const { model, context } = await openLlamaContext({ modelPath, sequences: 1, contextSize: CONTEXT });
  ref = { model, context, seq: context.getSequence() };
}, 60_000);

afterAll(async () => {
  await executor?.close();
  await ref?.context.dispose();
  await ref?.model.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("NextTokenReader", () => {
  it("reads llama.cpp's distribution as controlledEvaluate does: the same pairs in the same order", async () => {
    const { model, context } = await openLlamaContext({ modelPath, sequences: 1, contextSize: CONTEXT });
    const seq = context.getSequence();
    const reader = new NextTokenReader(seq);
    try {
      let input = PROMPTS[0] as number[];
      let refInput = input;
      await ref.seq.clearHistory();
      for (let step = 0; step < 6; step++) {
        // Decode steps alternate between a one-token array and nextAfter's reused input.
        const pairs = await (step > 0 && step % 2 === 0 ? reader.nextAfter(input[0] as number) : reader.next(input));
        const map = (await evaluateTokens(ref.seq, refInput, true)) as Map<number, number>;
        expect(pairs.length).toBe(2 * vocab.size);
        expect(pairs).toEqual([...map].flat());
        // Most likely first: llama.cpp sorted it.
        for (let k = 3; k < pairs.length; k += 2) expect(pairs[k] as number).toBeLessThanOrEqual(pairs[k - 2] as number);
        input = [pairs[2 * (step + 1)] as number]; // not always the greedy token
        refInput = input;
      }
      expect(seq.nextTokenIndex).toBe((PROMPTS[0] as number[]).length + 5);
    } finally {
      reader.dispose();
      await context.dispose();
      await model.dispose();
    }
  });

  it("sequences stepping together share one decode per step when the reader knows its peers", async () => {
    // Three sequences, two used: node-llama-cpp's own "every sequence queued" dispatch never fires.
    const { model, context } = await openLlamaContext({ modelPath, sequences: 3, contextSize: CONTEXT });
    const native = (context as unknown as { _ctx: { decodeBatch: (...a: unknown[]) => Promise<unknown> } })._ctx;
    const decode = native.decodeBatch.bind(native);
    let decodes = 0;
    Object.defineProperty(native, "decodeBatch", { value: (...a: unknown[]) => (decodes++, decode(...a)), writable: true, configurable: true });
    const seqs = [context.getSequence(), context.getSequence()];
    const steps = 10;
    const generate = async (peers: number): Promise<number[][]> => {
      decodes = 0;
      return Promise.all(
        seqs.map(async (seq, i) => {
          await seq.clearHistory();
          const reader = new NextTokenReader(seq, () => peers);
          try {
            let pairs = await reader.next(PROMPTS[i] as number[]);
            const out = [pairs[0] as number];
            for (let k = 1; k < steps; k++) {
              pairs = await reader.nextAfter(out[k - 1] as number);
              out.push(pairs[0] as number);
            }
            return out;
          } finally {
            reader.dispose();
          }
        }),
      );
    };
    try {
      const together = await generate(2);
      expect(decodes).toBe(steps);
      const alone = await generate(1);
      // Without it the two take turns: a decode each per step, after the shared prefill.
      expect(decodes).toBeGreaterThan(steps);
      expect(together).toEqual(alone);
    } finally {
      await context.dispose();
      await model.dispose();
    }
  });

  it("refuses to read after dispose()", async () => {
    const reader = new NextTokenReader(ref.seq);
    reader.dispose();
    await expect(reader.nextAfter(5)).rejects.toThrow(/after dispose/);
    await expect(reader.next([5])).rejects.toThrow(/after dispose/);
  });

  it("refuses a sequence without node-llama-cpp's internals, naming what is missing", () => {
    expect(() => new NextTokenReader({} as LlamaContextSequence)).toThrow(ArborError);
    expect(() => new NextTokenReader({} as LlamaContextSequence)).toThrow(/_decodeTokens.*needs node-llama-cpp 3\.21\.1/);
  });
});

describe("LlamaCppExecutor fast path against the reference computation", () => {
  const cases: [string, Request][] = [
    ["sampled with top-p and top logprobs", { maxTokens: N, temperature: 0.9, topP: 0.95, topLogprobs: 3, seed: 5 }],
    ["greedy", { maxTokens: N, temperature: 0, topP: 1, topLogprobs: 2, seed: 1 }],
    ["T = 1 without controls (the probability domain)", { maxTokens: N, temperature: 1, topP: 1, topLogprobs: 2, seed: 31 }],
    ["hot, full nucleus", { maxTokens: N, temperature: 1.5, topP: 1, topLogprobs: 0, seed: 77 }],
    ["logit_bias and min_tokens (the order is rebuilt)", { maxTokens: N, temperature: 1, topP: 1, topLogprobs: 1, seed: 9, controls: { logitBias: new Map([[300, 4], [5, -3]]), minTokens: 6 } }],
  ];

  it.each(cases)("%s: same tokens, bit-identical logprobs", async (_name, r) => {
    const want = await reference(PROMPTS[1] as number[], r);
    expectSame(await run(PROMPTS[1] as number[], r), want, true);
  });

  // A decode of four rows rounds differently from a decode of one (float32 matmuls of another shape,
  // as the controlled evaluation did too): the same tokens, logprobs within 1e-5.
  it("four sequences batched into one decode each get their own reference result", async () => {
    const reqs = PROMPTS.map((p, i): [number[], Request] => [p, { maxTokens: N - i, temperature: 1, topP: 0.9, topLogprobs: 1, seed: 100 + i }]);
    const got = await Promise.all(reqs.map(([p, r]) => run(p, r)));
    for (let i = 0; i < reqs.length; i++) {
      const [p, r] = reqs[i] as [number[], Request];
      expectSame(got[i] as GenerateResult, await reference(p, r), false);
    }
  });
});
