// The runner's placement, retry, abort and error paths over in-memory token backends whose
// "model" is position-keyed like the built-in engine's seeded sampling (token at position p is a
// function of (seed, p)); divided-engine.test.ts runs the same against real engines over HTTP.
import { describe, expect, it } from "vitest";
import { parseRunConfig } from "../../core/config.js";
import { ArborError } from "../../core/errors.js";
import {
  BackendHttpError,
  BackendUnreachableError,
  type BackendMetrics,
  type GenerateRequest,
  type GenerateResult,
  type TokenBackend,
} from "../../backends/backend.js";
import { DividedRollout, dividedRolloutFromConfig, type Placement } from "./divided-rollout.js";

const STOP = 2;

interface MemoryBackend extends TokenBackend {
  /** Scrapes answered so far; the next one answers `load[scrapes]` (the last one once past the end). */
  scrapes: number;
  requests: GenerateRequest[];
}

/** A backend whose token at position p is 3 + (seed·31 + p·17) mod 97, stop token at `stopAt`. */
function memoryBackend(
  name: string,
  opts: { load?: (number | null | Error)[]; capacity?: number | null; stopAt?: number; version?: number; fail?: Error; tokenIds?: boolean } = {},
): MemoryBackend {
  const b: MemoryBackend = {
    name,
    url: `http://${name}.invalid/v1`,
    type: "memory",
    capabilities: { tokenIds: opts.tokenIds ?? true, logprobs: true, pauseRestore: false },
    scrapes: 0,
    requests: [],
    chatCompletions: () => Promise.reject(new Error("not used")),
    completions: () => Promise.reject(new Error("not used")),
    models: () => Promise.resolve({}),
    health: () => Promise.resolve(),
    async scrapeMetrics(): Promise<BackendMetrics> {
      const load = opts.load ?? [0];
      const u = load[Math.min(b.scrapes++, load.length - 1)] as number | null | Error;
      if (u instanceof Error) throw u;
      return { running: 0, waiting: 0, kvUsage: u, kvCapacityTokens: opts.capacity === undefined ? 1000 : opts.capacity, prefixCacheQueries: null, prefixCacheHits: null, prefixCacheHitRate: null };
    },
    async generate(req: GenerateRequest): Promise<GenerateResult> {
      b.requests.push(req);
      if (opts.fail) throw opts.fail;
      if (req.signal?.aborted) throw req.signal.reason;
      const ids: number[] = [];
      for (let p = req.promptTokenIds.length; ids.length < req.maxTokens; p++) {
        const t = p === opts.stopAt ? STOP : 3 + ((((req.seed ?? 0) * 31 + p * 17) % 97) + 97) % 97;
        ids.push(t);
        if (t === STOP) break;
      }
      const stopped = ids[ids.length - 1] === STOP;
      return { outputTokenIds: ids, logprobs: ids.map((t) => -t / 1000), finishReason: stopped ? "stop" : "length", policyVersion: opts.version ?? 1, promptTokenIds: [...req.promptTokenIds] };
    },
  };
  return b;
}

const REQ: GenerateRequest = { promptTokenIds: [1, 40, 41], maxTokens: 10, temperature: 0.8, topP: 0.9, seed: 5, stopTokenIds: [STOP], programId: "p1" };

describe("DividedRollout", () => {
  it("places each chunk on the backend with the most free KV at that moment, and equals the unchunked answer", async () => {
    // a: 1000·(1−u) free; b: 2000·(1−u). Scrape k answers load[k].
    const a = memoryBackend("a", { load: [0.1, 0.1, 0.9, 0.5] });
    const b = memoryBackend("b", { load: [0.9, 0.8, 0.1, 0.75], capacity: 2000 });
    const placements: Placement[] = [];
    const rollout = new DividedRollout({ backends: [a, b], chunkTokens: 3, onPlacement: (p) => placements.push(p) });
    const r = await rollout.generate(REQ);
    // free: chunk0 a 900 / b 200; chunk1 a 900 / b 400; chunk2 a 100 / b 1800; chunk3 a 500 / b 500 (tie: order)
    expect(placements.map((p) => p.backend)).toEqual(["a", "a", "b", "a"]);
    expect(placements[2]?.scores).toEqual([
      { name: "a", freeKvTokens: 100 },
      { name: "b", freeKvTokens: 1800 },
    ]);
    expect(r.chunks.map((c) => [c.backend, c.maxTokens])).toEqual([["a", 3], ["a", 3], ["b", 3], ["a", 1]]);
    const whole = await memoryBackend("ref").generate(REQ);
    expect(r.outputTokenIds).toEqual(whole.outputTokenIds);
    expect(r.logprobs).toEqual(whole.logprobs);
    expect(r.finishReason).toBe("length");
    expect(r.promptTokenIds).toEqual(REQ.promptTokenIds);
  });

  it("sends every chunk with the request's seed, sampling, stop tokens and program, continuing from the tokens so far", async () => {
    const a = memoryBackend("a", { stopAt: 9 });
    const r = await new DividedRollout({ backends: [a], chunkTokens: 4 }).generate(REQ);
    expect(r.finishReason).toBe("stop");
    expect(r.outputTokenIds).toHaveLength(7);
    expect(r.outputTokenIds[6]).toBe(STOP);
    expect(a.requests.map((q) => [q.promptTokenIds.length, q.maxTokens])).toEqual([[3, 4], [7, 4]]);
    for (const q of a.requests) expect(q).toMatchObject({ temperature: 0.8, topP: 0.9, seed: 5, stopTokenIds: [STOP], programId: "p1" });
    expect(a.requests[1]?.promptTokenIds).toEqual([...REQ.promptTokenIds, ...r.outputTokenIds.slice(0, 4)]);
  });

  it("ranks backends that report no KV after those that do, and skips those whose scrape fails", async () => {
    const unknown = memoryBackend("unknown", { capacity: null });
    const broken = memoryBackend("broken", { load: [new Error("connection refused")] });
    const full = memoryBackend("full", { load: [0.99] });
    const placements: Placement[] = [];
    await new DividedRollout({ backends: [unknown, broken, full], chunkTokens: 5, onPlacement: (p) => placements.push(p) }).generate(REQ);
    expect(placements.map((p) => p.backend)).toEqual(["full", "full"]);
    expect(placements[0]?.scores).toEqual([
      { name: "unknown", freeKvTokens: null },
      { name: "broken", freeKvTokens: null, unavailable: "metrics: connection refused" },
      { name: "full", freeKvTokens: 10 },
    ]);
  });

  it("moves a chunk to the next-best backend when the chosen one cannot be reached", async () => {
    const gone = memoryBackend("gone", { fail: new BackendUnreachableError("gone", "http://gone.invalid/v1", "ECONNREFUSED") });
    const b = memoryBackend("b", { load: [0.5] });
    const r = await new DividedRollout({ backends: [gone, b], chunkTokens: 10 }).begin(REQ);
    await r.step();
    expect(r.placements.map((p) => [p.backend, p.attempt])).toEqual([["gone", 0], ["b", 1]]);
    expect(r.placements[1]?.scores[0]?.unavailable).toMatch(/generate failed: .*ECONNREFUSED/);
    expect(r.result().outputTokenIds).toHaveLength(10);
  });

  it("fails clearly when no backend can take a chunk, naming each one's reason", async () => {
    const a = memoryBackend("a", { load: [new Error("timeout")] });
    const b = memoryBackend("b", { fail: new BackendUnreachableError("b", "http://b.invalid/v1", "ECONNRESET") });
    const err = await new DividedRollout({ backends: [a, b], chunkTokens: 4 }).generate(REQ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect((err as ArborError).code).toBe("backend_unavailable");
    expect((err as Error).message).toMatch(/no backend available for chunk 0 \(a: metrics: timeout; b: generate failed: .*ECONNRESET\)/);
  });

  it("passes a backend's own error answer through unchanged", async () => {
    const a = memoryBackend("a", { fail: new BackendHttpError("a", "http://a.invalid/v1", 400, "prompt too long") });
    const g = new DividedRollout({ backends: [a], chunkTokens: 4 }).begin(REQ);
    await expect(g.step()).rejects.toBeInstanceOf(BackendHttpError);
    expect(g.done).toBe(true);
  });

  it("on abort: throws the reason before any token, else ends with the chunks so far", async () => {
    const a = memoryBackend("a");
    const before = new AbortController();
    before.abort(new Error("client went away"));
    await expect(new DividedRollout({ backends: [a], chunkTokens: 4 }).generate({ ...REQ, signal: before.signal })).rejects.toThrow(/client went away/);

    const mid = new AbortController();
    const g = new DividedRollout({ backends: [a], chunkTokens: 4 }).begin({ ...REQ, signal: mid.signal });
    expect(await g.step()).toBe(true);
    mid.abort();
    expect(await g.step()).toBe(false);
    expect(g.result()).toMatchObject({ finishReason: "abort" });
    expect(g.result().outputTokenIds).toHaveLength(4);
  });

  it("is built from gateway.dividedRollout in the run config, and absent when the option is", async () => {
    const backendsCfg = { backends: [{ name: "a", type: "builtin", url: "http://127.0.0.1:8000/v1" }] };
    expect(dividedRolloutFromConfig(parseRunConfig(backendsCfg).gateway.dividedRollout, [memoryBackend("a")])).toBeNull();
    const cfg = parseRunConfig({ ...backendsCfg, gateway: { dividedRollout: { chunkTokens: 4, maxChunks: 2 } } }).gateway.dividedRollout;
    const rollout = dividedRolloutFromConfig(cfg, [memoryBackend("a")]) as DividedRollout;
    expect(() => rollout.begin(REQ)).toThrow(/needs 3 chunks, over the limit maxChunks 2/);
    const r = await rollout.generate({ ...REQ, maxTokens: 8 });
    expect(r.chunks.map((c) => c.maxTokens)).toEqual([4, 4]);
    expect(() => parseRunConfig({ ...backendsCfg, gateway: { dividedRollout: { chunkTokens: 0 } } })).toThrow(/chunkTokens/);
    expect(() => parseRunConfig({ ...backendsCfg, gateway: { dividedRollout: { chunk: 4 } } })).toThrow(/dividedRollout/);
  });

  it("refuses bad configuration and a step while one runs", async () => {
    expect(() => new DividedRollout({ backends: [memoryBackend("t", { tokenIds: false })], chunkTokens: 4 })).toThrow(/none has token-level generation/);
    expect(() => new DividedRollout({ backends: [memoryBackend("a"), memoryBackend("a")], chunkTokens: 4 })).toThrow(/'a' is used twice/);
    expect(() => new DividedRollout({ backends: [memoryBackend("a")], chunkTokens: 0 })).toThrow(/chunkTokens must be an integer >= 1/);
    expect(() => new DividedRollout({ backends: [memoryBackend("a")], chunkTokens: 1, maxChunks: 5 }).begin(REQ)).toThrow(/needs 10 chunks, over the limit maxChunks 5/);
    const g = new DividedRollout({ backends: [memoryBackend("a")], chunkTokens: 4 }).begin(REQ);
    const first = g.step();
    await expect(g.step()).rejects.toThrow(/step\(\) called while a chunk is running/);
    await first;
  });
});
