// A seeded request continued from prompt ‖ tokens so far gives the rest of the unbroken generation,
// on the v0 executor and on the scheduled one (whose small step budget prefills the continuation in
// chunks, batched with another request): the draw at each position depends only on (seed, position).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { stopTokenIds } from "../model/chat-template.js";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import { loadScheduledLlamaCpp } from "./core/scheduled-engines.js";
import type { ScheduledExecutor } from "./core/scheduled-executor.js";
import type { Executor, GenerateResult } from "./executor.js";
import { LlamaCppExecutor } from "./llamacpp-executor.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";

const vocab = new Vocab();
const STOPS = stopTokenIds(vocab);
const PROMPT = [vocab.bosId, ...vocab.encode("3+4=")];
const N = 20;
const SEED = 5;

let dir: string;
let v0: LlamaCppExecutor;
let scheduled: ScheduledExecutor;
let whole: GenerateResult;

const gen = (e: Executor, prompt: number[], maxTokens: number, rng: Rng): Promise<GenerateResult> =>
  e.generate({ promptTokenIds: prompt, maxTokens, temperature: 0.9, topP: 0.95, topLogprobs: 0, rng });

function expectTail(got: GenerateResult, from: number): void {
  expect(got.tokens.map((t) => t.id)).toEqual(whole.tokens.slice(from).map((t) => t.id));
  // A prefill and a decode step compute the same position with float32 rounding apart (~1e-7).
  got.tokens.forEach((t, i) => expect(Math.abs(t.logprob - (whole.tokens[from + i]?.logprob as number))).toBeLessThan(1e-5));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-seeded-"));
  const modelPath = ensurePolicy(dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 1024 }).path;
  const shape = { modelPath, sequences: 2, contextSize: 256, maxWaiting: 4, stopTokenIds: STOPS };
  v0 = await LlamaCppExecutor.load(shape);
  scheduled = await loadScheduledLlamaCpp({ ...shape, blockSize: 4, maxNumBatchedTokens: 5 });
  whole = await gen(v0, PROMPT, N, PositionKeyedRng.fromSeed(SEED));
}, 60_000);

afterAll(async () => {
  await v0?.close();
  await scheduled?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("seeded continuation", () => {
  it("the reference runs the whole budget (every split point is exercised)", () => {
    expect(whole.finishReason).toBe("length");
    expect(whole.tokens).toHaveLength(N);
  });

  it.each([1, 7, 13])("v0 executor: continuing after %i tokens with a fresh Rng of the same seed gives the rest", async (k) => {
    const prefix = whole.tokens.slice(0, k).map((t) => t.id);
    expectTail(await gen(v0, [...PROMPT, ...prefix], N - k, PositionKeyedRng.fromSeed(SEED)), k);
  });

  it("scheduled executor: the same, with the continuation prefilled in chunks next to another request", async () => {
    const k = 9;
    const prefix = whole.tokens.slice(0, k).map((t) => t.id);
    const [cont, other] = await Promise.all([
      gen(scheduled, [...PROMPT, ...prefix], N - k, PositionKeyedRng.fromSeed(SEED)),
      gen(scheduled, [vocab.bosId, ...vocab.encode("busy neighbour")], 12, PositionKeyedRng.fromSeed(77)),
    ]);
    expectTail(cont, k);
    expect(other.tokens.length).toBeGreaterThan(0);
    expectTail(await gen(scheduled, PROMPT, N, PositionKeyedRng.fromSeed(SEED)), 0);
  });

  it("a plain stream Rng restarts its draws with each request, so its continuation does not line up", async () => {
    const k = 7;
    const streamWhole = await gen(v0, PROMPT, N, new Rng(SEED));
    const streamCont = await gen(v0, [...PROMPT, ...streamWhole.tokens.slice(0, k).map((t) => t.id)], N - k, new Rng(SEED));
    expect(streamWhole.tokens).toHaveLength(N);
    expect(streamCont.tokens.map((t) => t.id)).not.toEqual(streamWhole.tokens.slice(k).map((t) => t.id));
  });
});
