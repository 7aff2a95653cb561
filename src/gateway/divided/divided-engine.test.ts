// Divided rollout on two real built-in engines over HTTP (the tiny policy on llama.cpp; one engine
// runs the v0 executor, the other the scheduled one): with a fixed seed the chunked generation
// equals the unchunked one whatever the chunk size, and chunks go to the engine with more free KV.
// With two scheduled engines sharing the Redis KV pool, a chunk on the other engine loads the
// context's KV moved there instead of prefilling it again.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerateRequest, GenerateResult, TokenBackend } from "../../backends/backend.js";
import { createArborBackend } from "../../backends/vllm.js";
import type { LlamaCppStepRunner } from "../../engine/core/llamacpp-step-runner.js";
import type { ScheduledExecutor } from "../../engine/core/scheduled-executor.js";
import { RedisStatePool } from "../../engine/kv/redis-state-pool.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import { REDIS_TEST_URL, redisUnreachable } from "../../testing/redis-test.js";
import { DividedRollout } from "./divided-rollout.js";

const CONTEXT = 2048;
const N = 24;
const vocab = new Vocab();
const PROMPT = [vocab.bosId, ...vocab.encode("3+4=")];
const REQ: GenerateRequest = { promptTokenIds: PROMPT, maxTokens: N, temperature: 0.9, topP: 0.95, seed: 5 };
/** Greedy from this prompt the tiny policy runs to the context's end without a stop token. */
const LONG_PROMPT = [vocab.bosId, ...vocab.encode("12+30=")];

let dir: string;
let policyPath: string;
let engines: ListeningEngineServer[] = [];
let backends: TokenBackend[] = [];
let reference: GenerateResult;

/** Unchunked logprobs come from decode steps, chunked ones partly from a prefill: float32 rounding apart. */
function expectSameGeneration(got: GenerateResult, want: GenerateResult): void {
  expect(got.outputTokenIds).toEqual(want.outputTokenIds);
  expect(got.finishReason).toBe(want.finishReason);
  expect(got.logprobs).toHaveLength(want.logprobs.length);
  got.logprobs.forEach((lp, i) => expect(Math.abs(lp - (want.logprobs[i] as number))).toBeLessThan(1e-5));
}

/** Poll an engine's metrics until `ok` holds (bounded; the engine reports load at once). */
async function untilMetrics(b: TokenBackend, ok: (kvUsage: number) => boolean): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    const m = await b.scrapeMetrics();
    if (m.kvUsage !== null && ok(m.kvUsage)) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`engine ${b.name}: metrics never reached the expected load`);
}

/** A long greedy generation holding KV on `engine` until aborted. */
async function occupy(engine: ListeningEngineServer, backend: TokenBackend): Promise<() => Promise<void>> {
  const ac = new AbortController();
  const running = fetch(`${engine.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: LONG_PROMPT, max_tokens: CONTEXT - LONG_PROMPT.length, temperature: 0 }),
    signal: ac.signal,
  }).then((r) => r.text(), () => "");
  await untilMetrics(backend, (u) => u > 0.02);
  return async () => {
    ac.abort();
    await running;
    await untilMetrics(backend, (u) => u === 0);
  };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-divided-"));
  const policy = ensurePolicy(dir, { seed: 9, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: CONTEXT });
  policyPath = policy.path;
  const shape = { modelPath: policy.path, policyVersion: 1, sequences: 2, contextSize: CONTEXT, maxWaiting: 8 };
  engines = [
    await startEngineServer({ name: "e0", ...shape }),
    await startEngineServer({ name: "e1", ...shape, executorKind: "llamacpp-scheduled" }),
  ];
  backends = engines.map((e, i) => createArborBackend({ name: `e${i}`, url: `${e.url}/v1` }));
  reference = await (backends[0] as TokenBackend).generate(REQ);
}, 60_000);

afterAll(async () => {
  for (const e of engines) await e.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("divided rollout on real built-in engines", () => {
  it("the unchunked reference runs the whole budget and is the same on both executors", async () => {
    // Precondition: no stop token cuts the generation short, so every chunk boundary is exercised.
    expect(reference.finishReason).toBe("length");
    expect(reference.outputTokenIds).toHaveLength(N);
    expectSameGeneration(await (backends[1] as TokenBackend).generate(REQ), reference);
  });

  it.each([1, 3, 7])("chunks of %i tokens give the unchunked tokens and logprobs", async (chunkTokens) => {
    const rollout = new DividedRollout({ backends, chunkTokens });
    const r = await rollout.generate(REQ);
    expectSameGeneration(r, reference);
    expect(r.chunks).toHaveLength(Math.ceil(N / chunkTokens));
    expect(r.chunks.every((c) => c.maxTokens <= chunkTokens)).toBe(true);
    expect(r.tokenPolicyVersions).toEqual(new Array(N).fill(1));
    expect(r.policyVersion).toBe(1);
    expect(r.promptTokenIds).toEqual(PROMPT);
  }, 30_000);

  it("places each chunk on the engine with more free KV: chunks move when the other engine fills", async () => {
    const [b0, b1] = backends as [TokenBackend, TokenBackend];
    const g = new DividedRollout({ backends, chunkTokens: 8 }).begin(REQ);

    const release0 = await occupy(engines[0] as ListeningEngineServer, b0);
    expect(await g.step()).toBe(true);
    await release0();
    const release1 = await occupy(engines[1] as ListeningEngineServer, b1);
    expect(await g.step()).toBe(true);
    await release1();
    expect(await g.step()).toBe(true);
    expect(await g.step()).toBe(false);

    const [p0, p1, p2] = g.placements;
    const free = (p: typeof p0, name: string) => p?.scores.find((s) => s.name === name)?.freeKvTokens as number;
    // Chunk 0: e0 holds the long generation, so e1 (second in order) wins on free KV.
    expect(p0?.backend).toBe("e1");
    expect(free(p0, "e0")).toBeLessThan(free(p0, "e1"));
    // Chunk 1: now e1 is the fuller one.
    expect(p1?.backend).toBe("e0");
    expect(free(p1, "e1")).toBeLessThan(free(p1, "e0"));
    // Chunk 2: both idle, equal capacity: the tie goes to the first configured.
    expect(p2?.backend).toBe("e0");
    expect(free(p2, "e0")).toBe(free(p2, "e1"));
    expect(g.result().chunks.map((c) => c.backend)).toEqual(["e1", "e0", "e0"]);
    // Moving between engines (and executors) mid-generation changes nothing in the output.
    expectSameGeneration(g.result(), reference);
  }, 60_000);
});

const noRedis = await redisUnreachable();

describe.skipIf(noRedis !== undefined)(`divided rollout with the KV moving through the pool${noRedis ? ` (skipped: ${noRedis})` : ""}`, () => {
  it("each chunk on the other engine loads the context's KV from the pool, and the output is the unchunked one", async () => {
    const name = `test-${randomBytes(6).toString("hex")}`;
    const pooled = await Promise.all(
      ["p0", "p1"].map((n) =>
        startEngineServer({
          name: n,
          modelPath: policyPath,
          policyVersion: 1,
          sequences: 2,
          contextSize: CONTEXT,
          maxWaiting: 8,
          executorKind: "llamacpp-scheduled",
          kvPool: new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 64 * 1024 * 1024, name }),
        }),
      ),
    );
    try {
      // Each engine looks idle on every other scrape, so consecutive chunks alternate between them.
      let scrapes = 0;
      const alternating = pooled.map((e, i): TokenBackend => {
        const b = createArborBackend({ name: `p${i}`, url: `${e.url}/v1` });
        return Object.assign(Object.create(b) as TokenBackend, {
          scrapeMetrics: async () => {
            const m = await b.scrapeMetrics();
            const turn = Math.floor(scrapes++ / 2) % 2;
            return { ...m, kvUsage: turn === i ? 0 : 0.5 };
          },
        });
      });
      const stats = () => pooled.map((e) => ((e.executor as ScheduledExecutor).runner as LlamaCppStepRunner).stats());
      const before = stats();
      const r = await new DividedRollout({ backends: alternating, chunkTokens: 8 }).generate(REQ);
      expectSameGeneration(r, reference);
      expect(r.chunks.map((c) => c.backend)).toEqual(["p0", "p1", "p0"]);
      const after = stats();
      // Chunks 1 and 2 each loaded the context so far (prompt + 8·k tokens, the last one not yet fed).
      expect(after[1]!.loadedStates - before[1]!.loadedStates).toBe(1);
      expect(after[0]!.loadedStates - before[0]!.loadedStates).toBe(1);
      expect(after[1]!.loadedTokens - before[1]!.loadedTokens).toBe(PROMPT.length + 8 - 1);
      expect(after[0]!.loadedTokens - before[0]!.loadedTokens).toBe(PROMPT.length + 16 - 1);
    } finally {
      for (const e of pooled) await e.close();
    }
  }, 60_000);
});
