import { describe, expect, it } from "vitest";
import { runRolloutSim, type RolloutSimOptions } from "./rollout-sim.js";
import { SEER_GROUPED_SPECULATION } from "./grouped-speculation.js";
import { generateSeerWorkload } from "./seer-workload.js";

const tasks = generateSeerWorkload({ groups: 10, groupSize: 4, maxTokens: 256, meanRatio: 0.34, promptTokens: [16, 48], groupSigma: 0.8, sampleSigma: 0.5, vocabSize: 128_256, minTokenId: 3, seed: 4 });
const base: RolloutSimOptions = {
  tasks,
  groupSize: 4,
  policy: "seer",
  chunkTokens: 64,
  mode: "sync",
  batchGroups: 2,
  engines: 2,
  kvTokensPerEngine: 2048,
  maxNumSeqs: 8,
  trainStepMs: 400,
  weightSyncMs: 50,
  seed: 3,
};
const truth = new Map(tasks.map((t) => [t.id, t.oracleLengths]));

describe("rollout simulation", () => {
  it.each([
    ["sync", {}],
    ["async", { mode: "async" as const, maxInFlightGroups: 4, window: 2, maxStaleness: 1 }],
  ])("%s: every group reaches the trainer once with its true lengths, and the same seed gives the same batches", (_, extra) => {
    for (const policy of ["fifo-group", "seer", "oracle-lfs"]) {
      const o = { ...base, ...extra, policy };
      const r = runRolloutSim(o);
      const groups = r.batches.flatMap((b) => b.batch.groups);
      expect(groups).toHaveLength(10);
      expect(new Set(groups.map((g) => g.taskId)).size).toBe(10);
      for (const g of groups) {
        expect(g.trajectories.map((t) => t.tokens)).toEqual(truth.get(g.taskId));
        for (const t of g.trajectories) expect(t.versions.reduce((a, s) => a + s.tokens, 0)).toBe(t.tokens);
      }
      expect(r.outputTokens).toBe([...truth.values()].flat().reduce((a, b) => a + b, 0));
      if (o.mode === "sync") expect(r.batches.every((b) => b.batch.maxStaleness === 0)).toBe(true);
      for (const b of r.batches) {
        expect(b.tailMs).toBeLessThanOrEqual(b.rolloutMs);
        expect(b.rolloutMs).toBeGreaterThan(0);
      }
      expect(r.engineBusy).toBeGreaterThan(0);
      expect(r.engineBusy).toBeLessThanOrEqual(1);
      expect(runRolloutSim(o)).toEqual(r);
    }
  });

  it("grouped speculation: the same tokens in fewer simulated ms, and verifying drafts is not counted as recompute", () => {
    const o = { ...base, policy: "fifo-group", chunkTokens: undefined, kvTokensPerEngine: 16_384 };
    const plain = runRolloutSim(o);
    const spec = runRolloutSim({ ...o, speculation: SEER_GROUPED_SPECULATION });
    const tokens = (r: typeof plain) => r.batches.flatMap((b) => b.batch.groups.map((g) => [g.taskId, g.trajectories.map((t) => t.tokens)]));
    expect(tokens(spec)).toEqual(tokens(plain));
    expect(spec.outputTokens).toBe(plain.outputTokens);
    expect(spec.makespanMs).toBeLessThan(plain.makespanMs);
    // Room for every request and no division: nothing is computed twice, with or without drafts.
    expect(plain.preemptions + spec.preemptions).toBe(0);
    expect(plain.trace.recomputedTokensTotal).toBe(0);
    expect(spec.trace.recomputedTokensTotal).toBe(0);
    expect(runRolloutSim({ ...o, speculation: SEER_GROUPED_SPECULATION })).toEqual(spec);
  });

  it("async partial rollout: weight syncs interrupt chunks, whose tokens keep their version", () => {
    const r = runRolloutSim({ ...base, policy: "fifo-group", mode: "async", maxInFlightGroups: 6, window: 6, trainStepMs: 50 });
    expect(r.interrupted).toBeGreaterThan(0);
    const spans = r.batches.flatMap((b) => b.batch.groups.flatMap((g) => g.trajectories.map((t) => t.versions.length)));
    expect(Math.max(...spans)).toBeGreaterThan(1); // some trajectory spans several policy versions
    expect(r.batches.some((b) => b.batch.meanStaleness > 0)).toBe(true);
  });

  it("stops after maxBatches and rejects clusters that cannot hold a request", () => {
    expect(runRolloutSim({ ...base, maxBatches: 2 }).batches).toHaveLength(2);
    expect(() => runRolloutSim({ ...base, kvTokensPerEngine: 200 })).toThrow(/cannot hold the longest request/);
    expect(() => runRolloutSim({ ...base, engines: 0 })).toThrow(/engines must be an integer >= 1/);
    expect(() => runRolloutSim({ ...base, policy: "nope" })).toThrow(/unknown rollout scheduler 'nope'/);
  });
});
