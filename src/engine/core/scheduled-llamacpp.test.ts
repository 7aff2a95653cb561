import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { CapacityError } from "../../core/errors.js";
import { Rng } from "../../core/rng.js";
import { stopTokenIds } from "../../model/chat-template.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import type { GenerateResult } from "../executor.js";
import { LlamaCppExecutor } from "../llamacpp-executor.js";
import type { StepPlan } from "../scheduler/step-plan.js";
import { AbortedError } from "../sequence-pool.js";
import { loadScheduledLlamaCpp, type ScheduledEngineOptions } from "./scheduled-engines.js";
import type { ScheduledExecutor } from "./scheduled-executor.js";
import type { LlamaCppStepRunner } from "./llamacpp-step-runner.js";
import { expectSameResults } from "../../testing/same-results.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();
const STOPS = stopTokenIds(vocab);
const CTX = 256;

let dir: string;
let modelPath: string;
let reference: LlamaCppExecutor;
const opened: ScheduledExecutor[] = [];

interface Case {
  prompt: number[];
  seed: number;
  maxTokens: number;
  temperature: number;
}

function prompt(text: string): number[] {
  return [vocab.bosId, ...vocab.encode(text)];
}

const gen = (e: { generate: LlamaCppExecutor["generate"] }, c: Case, extra: { signal?: AbortSignal } = {}): Promise<GenerateResult> =>
  e.generate({ promptTokenIds: c.prompt, maxTokens: c.maxTokens, temperature: c.temperature, topP: 1, topLogprobs: 2, rng: new Rng(c.seed), ...extra });

/** The reference: LlamaCppExecutor, one request at a time. */
async function expected(cases: Case[]): Promise<GenerateResult[]> {
  const out: GenerateResult[] = [];
  for (const c of cases) out.push(await gen(reference, c));
  return out;
}

async function scheduled(o: Partial<ScheduledEngineOptions>, plans?: StepPlan[]): Promise<ScheduledExecutor> {
  const e = await loadScheduledLlamaCpp({
    modelPath,
    sequences: 3,
    contextSize: CTX,
    maxWaiting: 8,
    stopTokenIds: STOPS,
    ...(plans ? { onStep: (p: StepPlan) => plans.push(p) } : {}),
    ...o,
  });
  opened.push(e);
  return e;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-sched-llama-"));
  modelPath = ensurePolicy(dir, INIT).path;
  reference = await LlamaCppExecutor.load({ modelPath, sequences: 1, contextSize: CTX, maxWaiting: 4, stopTokenIds: STOPS });
});

afterAll(async () => {
  for (const e of opened) await e.close();
  await reference?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const CASES: Case[] = [
  { prompt: prompt("What is 2+3? Answer briefly."), seed: 7, maxTokens: 12, temperature: 1 },
  { prompt: prompt("Name a colour."), seed: 8, maxTokens: 10, temperature: 0.8 },
  { prompt: prompt("The quick brown fox jumps over the lazy dog, twice."), seed: 9, maxTokens: 14, temperature: 0 },
];

describe("ScheduledExecutor on llama.cpp", () => {
  it("gives LlamaCppExecutor's tokens for one request, and for three batched together", async () => {
    const want = await expected(CASES);
    const plans: StepPlan[] = [];
    const e = await scheduled({}, plans);
    expectSameResults([await gen(e, CASES[0]!)], [want[0]!]);
    expect(plans.every((p) => p.chunks.length === 1)).toBe(true);
    plans.length = 0;
    const got = await Promise.all(CASES.map((c) => gen(e, c)));
    expectSameResults(got, want);
    // Continuous batching: the three prompts are prefilled in one step (the first one's leading
    // blocks are prefix-cache hits from the single run), then decoded together.
    expect(plans[0]!.chunks.map((c) => c.numComputedTokens + c.numNewTokens)).toEqual(CASES.map((c) => c.prompt.length));
    expect(plans[0]!.chunks[0]!.numComputedTokens).toBeGreaterThan(0);
    expect(plans.filter((p) => p.chunks.length === 3).length).toBeGreaterThan(5);
    expect(e.stats()).toMatchObject({ running: 0, waiting: 0, usedTokens: 0 });
  });

  it("chunked prefill of a long prompt with a small budget gives the same tokens", async () => {
    const c: Case = { prompt: prompt("A long prompt: " + "the tree grows branches. ".repeat(4)), seed: 21, maxTokens: 8, temperature: 1 };
    expect(c.prompt.length).toBeGreaterThan(40);
    const want = await expected([c]);
    const plans: StepPlan[] = [];
    const e = await scheduled({ maxNumBatchedTokens: 16 }, plans);
    expectSameResults([await gen(e, c)], want);
    const prefill = plans.filter((p) => p.chunks[0]!.numNewTokens > 1);
    expect(prefill.length).toBe(Math.ceil(c.prompt.length / 16));
    expect(prefill.slice(0, -1).every((p) => !p.chunks[0]!.samples)).toBe(true);
  });

  it("preempts under a tiny KV cache, counts it, and still gives every request its tokens", async () => {
    const cases = CASES.map((c) => ({ ...c, maxTokens: 16 }));
    const want = await expected(cases);
    // The first two alone outgrow 18 blocks of 4 tokens while decoding (11 + 8 blocks).
    const e = await scheduled({ blockSize: 4, numBlocks: 18, contextSize: 72, maxNumBatchedTokens: 72 });
    const got = await Promise.all(cases.map((c) => gen(e, c)));
    expectSameResults(got, want);
    expect(e.stats().preemptions).toBeGreaterThan(0);
  });

  it("counts prefix-cache hits for a second request sharing the prompt prefix", async () => {
    const shared = "You are a careful assistant who answers with one word. ";
    const a: Case = { prompt: prompt(shared + "Sky?"), seed: 3, maxTokens: 6, temperature: 1 };
    const b: Case = { prompt: prompt(shared + "Grass?"), seed: 4, maxTokens: 6, temperature: 1 };
    const want = await expected([a, b]);
    const e = await scheduled({ blockSize: 8 });
    expectSameResults([await gen(e, a)], [want[0]!]);
    expect(e.stats().prefixCacheHits).toBe(0);
    expectSameResults([await gen(e, b)], [want[1]!]);
    const s = e.stats();
    expect(s.prefixCacheQueries).toBe(a.prompt.length + b.prompt.length);
    expect(s.prefixCacheHits).toBe(Math.floor((b.prompt.length - 1) / 8) * 8);
    expect(s.prefixCacheHits).toBeGreaterThan(40);
    // b reuses a's sequence: the shared text is not evaluated again, nothing is recomputed.
    const r = (e.runner as LlamaCppStepRunner).stats();
    expect(r.reusedTokens).toBeGreaterThanOrEqual(s.prefixCacheHits!);
    expect(r.recomputedTokens).toBe(0);
  });

  it("recomputes a prefix-cache hit that no sequence holds any more", async () => {
    const shared = "You are a careful assistant who answers with one word. ";
    const a: Case = { prompt: prompt(shared + "Sky?"), seed: 3, maxTokens: 4, temperature: 1 };
    const c: Case = { prompt: prompt("Something else entirely."), seed: 5, maxTokens: 4, temperature: 1 };
    const b: Case = { prompt: prompt(shared + "Grass?"), seed: 4, maxTokens: 6, temperature: 1 };
    const want = await expected([a, c, b]);
    const e = await scheduled({ sequences: 1, blockSize: 8 });
    const got = [await gen(e, a), await gen(e, c), await gen(e, b)];
    expectSameResults(got, want);
    expect(e.stats().prefixCacheHits).toBeGreaterThan(40);
    // c overwrote a's sequence except the BOS they share: the rest of b's cache hit is recomputed.
    expect((e.runner as LlamaCppStepRunner).stats().recomputedTokens).toBe(e.stats().prefixCacheHits! - 1);
  });

  it("recomputes a prefix-cache hit when the free sequence holds as many tokens of another prompt", async () => {
    const shared = "You are a careful assistant who answers with one word. ";
    const a: Case = { prompt: prompt(shared + "Sky?"), seed: 3, maxTokens: 4, temperature: 1 };
    const b: Case = { prompt: prompt(shared + "Grass?"), seed: 4, maxTokens: 6, temperature: 1 };
    // b's prefix-cache hit: a's blocks of 4 it shares (a's outputs come after where the prompts part).
    let common = 0;
    while (a.prompt[common] === b.prompt[common]) common++;
    const hit = Math.floor(common / 4) * 4;
    // c leaves its sequence holding exactly `hit` tokens (prompt and outputs but the last): b's
    // computed tokens by count, though only the BOS is b's.
    const c: Case = { prompt: prompt("Something else entirely."), seed: 6, maxTokens: hit - prompt("Something else entirely.").length + 1, temperature: 1 };
    const want = await expected([a, c, b]);
    expect(want[1]!.tokens).toHaveLength(c.maxTokens);
    const e = await scheduled({ sequences: 1, blockSize: 4 });
    const got = [await gen(e, a), await gen(e, c)];
    expect((e.runner as LlamaCppStepRunner).sequenceTokens(0)).toHaveLength(hit);
    const hitsBefore = e.stats().prefixCacheHits!;
    got.push(await gen(e, b));
    expect(e.stats().prefixCacheHits! - hitsBefore).toBe(hit);
    expectSameResults(got, want);
    expect((e.runner as LlamaCppStepRunner).stats().recomputedTokens).toBe(hit - 1);
  });

  it("aborts through the signal: queued requests are refused, started ones end with their tokens", async () => {
    const e = await scheduled({ sequences: 1, maxWaiting: 1 });
    const first = new AbortController();
    let n = 0;
    const running = e.generate({
      promptTokenIds: CASES[0]!.prompt,
      maxTokens: 50,
      temperature: 1,
      topP: 1,
      topLogprobs: 0,
      rng: new Rng(1),
      signal: first.signal,
      onToken: () => {
        if (++n === 3) first.abort();
      },
    });
    const queued = new AbortController();
    const waiting = gen(e, CASES[1]!, { signal: queued.signal });
    await expect(gen(e, CASES[2]!)).rejects.toBeInstanceOf(CapacityError);
    queued.abort();
    await expect(waiting).rejects.toBeInstanceOf(AbortedError);
    const r = await running;
    expect(r.finishReason).toBe("abort");
    expect(r.tokens).toHaveLength(3);
    // The engine keeps serving after aborts.
    expectSameResults([await gen(e, CASES[2]!)], await expected([CASES[2]!]));
    expect(e.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it("runs under a virtual clock with the same scheduler code and the same tokens", async () => {
    const clock = new VirtualClock(5_000);
    const cases: Case[] = [
      { prompt: prompt("virtual time"), seed: 21, maxTokens: 6, temperature: 1 },
      { prompt: prompt("same scheduler"), seed: 22, maxTokens: 5, temperature: 0.8 },
    ];
    const want = await expected(cases);
    const e = await scheduled({ clock });
    expectSameResults(await Promise.all(cases.map((c) => gen(e, c))), want);
    // The virtual clock never moved: nothing in the engine waited on wall time.
    expect(clock.now()).toBe(5_000);
  });
});
