import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { Rng } from "../../core/rng.js";
import { getCostProfile } from "../../engine/costmodel/profile.js";
import { generateAgentWorkload } from "../agent-workload.js";
import { DisaggCluster, type ClusterFinishedRequest, type ClusterRequest, type DisaggClusterOptions, type EngineRole } from "./disagg-cluster.js";

const PROFILE = getCostProfile("llama-3-8b/h100");
const BS = PROFILE.blockSize;
const VOCAB = 128_256;
const STOP = 2;

function cluster(roles: EngineRole[], extra: Partial<DisaggClusterOptions> = {}) {
  const clock = new VirtualClock();
  const done: ClusterFinishedRequest[] = [];
  const c = new DisaggCluster({
    roles,
    profile: PROFILE,
    clock,
    rng: new Rng(7),
    vocabSize: VOCAB,
    stopTokenIds: [STOP],
    numBlocksPerInstance: 4096,
    onFinished: (f) => done.push(f),
    ...extra,
  });
  return { clock, c, done };
}

function prompt(n: number, seed = 1): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => rng.int(3, VOCAB - 1));
}

/** Arrivals of a single-turn agent workload (shared system prompt, own task, 40–120 output tokens). */
function workload(seed: number): { at: number; req: ClusterRequest }[] {
  const programs = generateAgentWorkload({
    programs: 24,
    turns: 1,
    systemPromptTokens: 1500,
    taskTokens: 1200,
    outputTokens: [40, 120],
    toolOutputTokens: [0, 0],
    toolMs: [0, 0],
    arrivalWindowMs: 3000,
    vocabSize: VOCAB,
    minTokenId: 3,
    seed,
  });
  return programs.map((p) => {
    const n = p.turns[0]!.outputLength;
    return { at: p.arrivalMs, req: { requestId: p.programId, promptTokenIds: p.promptTokenIds, maxTokens: 4 * n, outputLength: n } };
  });
}

function runWorkload(roles: EngineRole[], seed: number) {
  const k = cluster(roles);
  const w = workload(seed);
  for (const { at, req } of w) k.clock.setTimer(at, () => k.c.submit(req));
  k.c.run();
  return { ...k, w };
}

describe("DisaggCluster prefill -> decode", () => {
  it("prefills on the prefill instance, hands the KV over through L3, and decodes the rest", () => {
    const { c, done } = cluster(["prefill", "decode"]);
    const L = 1000;
    const N = 25;
    c.submit({ requestId: "r", promptTokenIds: prompt(L), maxTokens: 100, outputLength: N });
    c.run();

    expect(done).toHaveLength(1);
    const f = done[0]!;
    expect(f.requestId).toBe("r");
    expect(f.outputTokenIds).toHaveLength(N);
    expect(f.logprobs).toHaveLength(N);
    expect(f.finishReason).toBe("stop");
    expect(f.outputTokenIds[N - 1]).toBe(STOP);
    expect(f.outputTokenIds.slice(0, -1)).not.toContain(STOP);
    expect(f.numPromptTokens).toBe(L);
    expect([f.prefillInstance, f.decodeInstance]).toEqual([0, 1]);
    expect(f.firstTokenTime).toBeGreaterThan(f.arrivalTime);
    expect(f.finishTime).toBeGreaterThan(f.firstTokenTime + f.handoff!.offloadMs);

    const [pre, dec] = c.instances;
    const fullBlocks = Math.floor(L / BS); // the first token's KV was never computed by the prefill
    expect(f.handoff!.blocksSent).toBe(fullBlocks);
    expect(f.handoff!.bytesSent).toBe(fullBlocks * BS * PROFILE.kvBytesPerToken);
    expect(f.handoff!.offloadMs).toBeCloseTo(f.handoff!.bytesSent / PROFILE.l3BandwidthBytesPerMs, 9);
    expect(f.handoff!.decodeCachedTokens).toBe(fullBlocks * BS);
    expect(c.pool.size()).toBe(fullBlocks);

    // The prefill instance computed the whole prompt and nothing else.
    expect(pre!.engine.usage.computedTokens).toBe(L);
    // The decode instance loaded every full block from L3 and recomputed only the partial last block
    // (plus the first token), then one token per decode step.
    expect(dec!.kv.stats().loadedBlocks).toBe(fullBlocks);
    const recomputed = L + 1 - fullBlocks * BS;
    expect(recomputed).toBeLessThanOrEqual(BS);
    expect(dec!.engine.usage.computedTokens).toBe(recomputed + (N - 2));
    expect(dec!.steps.bytesLoaded).toBe(f.handoff!.bytesSent);
    expect(c.stats()).toMatchObject({ submitted: 1, finished: 1, inFlight: 0, handoffs: 1, handoffBlocksSent: fullBlocks });
    for (const i of c.instances) i.kv.checkInvariants();
    expect(c.hasWork()).toBe(false);
  });

  it("runs without annotation to maxTokens, and ends on the prefill instance when one token is all it gets", () => {
    const { c, done } = cluster(["prefill", "decode"]);
    c.submit({ requestId: "long", promptTokenIds: prompt(300), maxTokens: 9 });
    c.submit({ requestId: "one", promptTokenIds: prompt(300, 2), maxTokens: 9, outputLength: 1 });
    c.submit({ requestId: "max1", promptTokenIds: prompt(300, 3), maxTokens: 1 });
    c.run();
    const byId = new Map(done.map((f) => [f.requestId, f]));
    expect(byId.get("long")).toMatchObject({ finishReason: "length", decodeInstance: 1 });
    expect(byId.get("long")!.outputTokenIds).toHaveLength(9);
    expect(byId.get("one")).toMatchObject({ finishReason: "stop", outputTokenIds: [STOP] });
    expect(byId.get("max1")!.finishReason).toBe("length");
    expect(byId.get("max1")!.outputTokenIds).toHaveLength(1);
    for (const id of ["one", "max1"]) {
      expect(byId.get(id)!.decodeInstance).toBeUndefined();
      expect(byId.get(id)!.handoff).toBeUndefined();
    }
    expect(c.stats().handoffs).toBe(1);
  });

  it("charges the handoff at the L3 bandwidth: a 10x faster pool finishes earlier by 0.9 x the transfer time", () => {
    const finish = (bw: number) => {
      const { c, done } = cluster(["prefill", "decode"], { l3BandwidthBytesPerMs: bw });
      c.submit({ requestId: "r", promptTokenIds: prompt(4000), maxTokens: 50, outputLength: 20 });
      c.run();
      return { f: done[0]!, loaded: c.instances[1]!.steps.bytesLoaded };
    };
    const bw = PROFILE.l3BandwidthBytesPerMs;
    const slow = finish(bw);
    const fast = finish(10 * bw);
    expect(fast.f.finishTime).toBeLessThan(slow.f.finishTime);
    // Same tokens, same compute: only the offload (timer) and the load (decode step) change.
    expect(fast.f.outputTokenIds).toEqual(slow.f.outputTokenIds);
    const bytes = slow.f.handoff!.bytesSent + slow.loaded;
    expect(bytes).toBeGreaterThan(0);
    expect(slow.f.finishTime - fast.f.finishTime).toBeCloseTo((0.9 * bytes) / bw, 6);
  });

  it("queues handoffs on a prefill instance's link to L3", () => {
    const { c, done } = cluster(["prefill", "decode", "decode"]);
    // A short request occupies the idle prefill instance, so the next two are prefilled in one step,
    // finish together, and the second transfer waits for the first.
    c.submit({ requestId: "w", promptTokenIds: prompt(16, 3), maxTokens: 1 });
    c.submit({ requestId: "a", promptTokenIds: prompt(800, 4), maxTokens: 5, outputLength: 5 });
    c.submit({ requestId: "b", promptTokenIds: prompt(800, 5), maxTokens: 5, outputLength: 5 });
    c.run();
    const [a, b] = ["a", "b"].map((id) => done.find((f) => f.requestId === id)!);
    expect(a!.firstTokenTime).toBe(b!.firstTokenTime);
    expect(b!.handoff!.offloadMs).toBeCloseTo(2 * a!.handoff!.offloadMs, 9);
    // The decode instance is picked when the KV arrives: the second goes to the idle one.
    expect([a!.decodeInstance, b!.decodeInstance]).toEqual([1, 2]);
  });
});

describe("DisaggCluster mixed instances", () => {
  it("runs each request whole on the least-loaded mixed instance, with no transfer", () => {
    const { c, done } = cluster(["mixed", "mixed"]);
    for (let i = 0; i < 4; i++) c.submit({ requestId: `m${i}`, promptTokenIds: prompt(500, 10 + i), maxTokens: 64, outputLength: 10 + i });
    c.run();
    expect(done).toHaveLength(4);
    for (const f of done) {
      expect(f.outputTokenIds).toHaveLength(10 + Number(f.requestId.slice(1)));
      expect(f.decodeInstance).toBeUndefined();
      expect(f.handoff).toBeUndefined();
      expect(f.firstTokenTime).toBeGreaterThan(f.arrivalTime);
      expect(f.firstTokenTime).toBeLessThan(f.finishTime);
    }
    expect(done.map((f) => f.prefillInstance).sort()).toEqual([0, 0, 1, 1]);
    expect(c.stats()).toMatchObject({ handoffs: 0, handoffBytesSent: 0 });
    expect(c.pool.size()).toBe(0);
    for (const i of c.instances) {
      expect(i.kv.stats().loadedBlocks).toBe(0);
      expect(i.steps.bytesLoaded + i.steps.bytesOffloaded).toBe(0);
    }
  });
});

describe("DisaggCluster under a workload", () => {
  it("is deterministic: the same seed gives the same results twice", () => {
    const key = (done: ClusterFinishedRequest[]) =>
      JSON.stringify(done.map((f) => [f.requestId, f.outputTokenIds, f.finishTime, f.firstTokenTime, f.decodeInstance, f.handoff]));
    const a = runWorkload(["prefill", "decode", "decode"], 3);
    const b = runWorkload(["prefill", "decode", "decode"], 3);
    expect(a.done).toHaveLength(24);
    expect(key(a.done)).toBe(key(b.done));
    const other = runWorkload(["prefill", "decode", "decode"], 4);
    expect(key(other.done)).not.toBe(key(a.done));
  });

  it("keeps long prefills out of decode steps: 1P+1D decode steps stay far shorter than a mixed instance's", () => {
    const pd = runWorkload(["prefill", "decode"], 5);
    const mixed = runWorkload(["mixed"], 5);
    for (const r of [pd, mixed]) {
      expect(r.done).toHaveLength(24);
      const want = new Map(r.w.map(({ req }) => [req.requestId, req.outputLength]));
      for (const f of r.done) {
        expect(f.finishReason).toBe("stop");
        expect(f.outputTokenIds).toHaveLength(want.get(f.requestId)!);
      }
    }
    const dec = pd.c.instances[1]!.steps;
    const mix = mixed.c.instances[0]!.steps;
    // The decode instance only ever recomputes a partial block per request...
    expect(dec.maxPrefillChunkTokens).toBeLessThanOrEqual(BS);
    expect(mix.maxPrefillChunkTokens).toBeGreaterThan(1000);
    // ...so its worst step (what a decoding sequence waits) is a fraction of the mixed instance's.
    expect(dec.maxStepMs * 5).toBeLessThan(mix.maxStepMs);
    // The shared system prompt is sent to L3 once, not once per request.
    const sent = pd.c.stats().handoffBlocksSent;
    const perRequest = pd.done.reduce((s, f) => s + Math.floor(f.numPromptTokens / BS), 0);
    expect(sent).toBeLessThan(perRequest);
    expect(pd.c.instances[1]!.kv.stats().loadedBlocks).toBeGreaterThan(0);
  });
});

describe("DisaggCluster validation", () => {
  it("rejects bad roles, options and requests with a clear error", () => {
    expect(() => cluster([])).toThrowError(ArborError);
    expect(() => cluster(["prefill"])).toThrowError(/at least one "prefill" and one "decode"/);
    expect(() => cluster(["mixed", "decode"])).toThrowError(/mixes "mixed"/);
    expect(() => cluster(["gpu" as EngineRole])).toThrowError(/roles\[0\]/);
    expect(() => cluster(["mixed"], { l3BandwidthBytesPerMs: 0 })).toThrowError(/l3BandwidthBytesPerMs/);
    const { c } = cluster(["prefill", "decode"], { maxInFlight: 1 });
    expect(() => c.submit({ requestId: "x", promptTokenIds: [5], maxTokens: 2, outputLength: 0 })).toThrowError(/outputLength/);
    expect(() => c.submit({ requestId: "x", promptTokenIds: [], maxTokens: 2 })).toThrowError(/promptTokenIds/);
    c.submit({ requestId: "x", promptTokenIds: [5, 6], maxTokens: 2 });
    expect(() => c.submit({ requestId: "x", promptTokenIds: [5], maxTokens: 2 })).toThrowError(/already in the cluster/);
    expect(() => c.submit({ requestId: "y", promptTokenIds: [5], maxTokens: 2 })).toThrowError(/full \(limit 1\)/);
    c.run();
    expect(c.stats().finished).toBe(1);
  });
});
