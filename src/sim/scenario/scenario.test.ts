import { describe, expect, it } from "vitest";
import { runRolloutSim } from "../rollout-sim.js";
import { generateSeerWorkload } from "../seer-workload.js";
import { runSim } from "./run-sim.js";
import { parseWorkload } from "./workload-file.js";

// A rollout workload small enough for a test: 2 iterations of 12 groups × 4 at scale 0.5, on 2 of 4 engines
// whose KV holds a few requests at once, so requests queue, chunks move and engines preempt.
const SMALL = `
name: small-rollout
kind: rollout
description: a small rollout for tests
sources: ["made up for the test"]
cluster: { gpus: 4, gpusPerInstance: 1, profile: moonlight-16b-a3b/h800, maxNumSeqs: 12, kvTokensPerInstance: 9000 }
workload: { prompts: 24, groupSize: 4, maxTokens: 1500, meanTokens: 500, promptTokens: [32, 160], groupSigma: 0.8, sampleSigma: 0.5, iterations: 2 }
divided: { chunkTokens: 256 }
sampleMs: 500
`;
const scenario = parseWorkload(SMALL, "small.yaml");

describe("arbor sim scenarios", () => {
  it("conservation: every request completed or accounted for, KV never above capacity, time only forward", async () => {
    const requests = 2 * 12 * 4;
    for (const system of scenario.systems) {
      const r = await scenario.run(system, { seed: 7, scale: 0.5 });
      const s = r.summary;
      expect(s.requests).toBe(requests);
      expect(s.completed + s.aborted).toBe(requests);
      expect(s.completed).toBe(requests);
      expect(s.peakKvUsage).toBeGreaterThan(0);
      expect(s.peakKvUsage).toBeLessThanOrEqual(1);
      for (const pts of Object.values(r.series.kvUsage)) for (const p of pts) expect(p.value).toBeLessThanOrEqual(1);
      expect(Object.keys(r.series.kvUsage)).toEqual(["engine-0", "engine-1"]);
      // The CDF rises, starts after time 0 and ends at the makespan.
      const cdf = r.completionPercentilesMs;
      expect(cdf).toHaveLength(101);
      for (let i = 1; i < cdf.length; i++) expect(cdf[i]).toBeGreaterThanOrEqual(cdf[i - 1] as number);
      expect(cdf[0]).toBeGreaterThan(0);
      expect(cdf[100]).toBe(s.makespanMs);
      for (const series of [r.series.throughput, r.series.preemptions, r.series.recomputedTokens]) {
        for (let i = 1; i < series.length; i++) expect((series[i] as { tMs: number }).tMs).toBeGreaterThan((series[i - 1] as { tMs: number }).tMs);
      }
      // Tokens in the throughput buckets are the tokens the run produced.
      const bucketMs = (r.series.throughput[1]?.tMs ?? 0) - (r.series.throughput[0]?.tMs ?? 0);
      if (bucketMs > 0) expect(r.series.throughput.reduce((a, p) => a + (p.value * bucketMs) / 1000, 0)).toBeGreaterThanOrEqual(s.outputTokens * 0.999);
      expect(s.tailMs).toBeLessThanOrEqual(s.iterationMs);
    }
  });

  it("every request ends after its first placement, the outputs are the workload's lengths, and the engines preempt and recompute under KV pressure", () => {
    const tasks = generateSeerWorkload({ groups: 10, groupSize: 4, maxTokens: 1500, meanRatio: 0.33, promptTokens: [32, 160], groupSigma: 0.8, sampleSigma: 0.5, vocabSize: 128_256, minTokenId: 3, seed: 2 });
    const r = runRolloutSim({ tasks, groupSize: 4, policy: "fifo-group", mode: "sync", batchGroups: 10, maxBatches: 1, engines: 1, kvTokensPerEngine: 6000, maxNumSeqs: 16, trainStepMs: 0, weightSyncMs: 0, profile: "moonlight-16b-a3b/h800", sampleMs: 200, seed: 1 });
    const t = r.trace;
    expect(t.completed).toBe(40);
    t.endedMs.forEach((end, i) => expect(end).toBeGreaterThanOrEqual(t.submittedMs[i] as number));
    expect(r.outputTokens).toBe(tasks.flatMap((x) => x.oracleLengths).reduce((a, b) => a + b, 0));
    expect(t.sampledTokens).toBeGreaterThanOrEqual(r.outputTokens);
    expect(r.preemptions).toBeGreaterThan(0);
    expect(t.recomputedTokensTotal).toBeGreaterThan(0);
    expect(t.peakKvUsage).toBeLessThanOrEqual(1);
  });

  it("is deterministic: the same seed gives byte-identical JSON, another seed another run", async () => {
    const a = await runSim(scenario, { systems: ["verl-like", "seer"], seed: 3, scale: 0.25 });
    const b = await runSim(scenario, { systems: ["verl-like", "seer"], seed: 3, scale: 0.25 });
    const c = await runSim(scenario, { systems: ["verl-like", "seer"], seed: 4, scale: 0.25 });
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    expect(JSON.stringify(c)).not.toBe(JSON.stringify(a));
    expect(a.baseline).toBe("verl-like");
    expect(a.ratios[0]).toEqual({ system: "verl-like", speedup: 1, throughput: 1, tailReduction: 0 });
    const seer = a.systems[1]?.summary;
    expect(a.ratios[1]?.speedup).toBeCloseTo((a.systems[0]?.summary.iterationMs ?? 0) / (seer?.iterationMs ?? 1), 12);
  });

  it("tells its progress, requests finished of all, without changing the run; runSim passes it on per system", async () => {
    const seen: [string, number, number][] = [];
    const told = await runSim(scenario, { systems: ["verl-like", "seer"], seed: 3, scale: 0.25, onAdvance: (s, done, total) => seen.push([s, done, total]) });
    expect(JSON.stringify(told)).toBe(JSON.stringify(await runSim(scenario, { systems: ["verl-like", "seer"], seed: 3, scale: 0.25 })));
    for (const [i, system] of ["verl-like", "seer"].entries()) {
      const requests = told.systems[i]!.summary.requests;
      expect(seen.filter((x) => x[0] === system)).toEqual(Array.from({ length: requests }, (_, k) => [system, k + 1, requests]));
    }
  });

  it("refuses unknown and repeated systems and bad scales, naming them", async () => {
    await expect(runSim(scenario, { systems: ["nope"], seed: 1, scale: 0.5 })).rejects.toThrow(/no system 'nope' \(known: verl-like, seer-divided, seer, seer-specdec, oracle, arbor\)/);
    await expect(runSim(scenario, { systems: ["seer", "seer"], seed: 1, scale: 0.5 })).rejects.toThrow(/repeats a system/);
    await expect(scenario.run("seer", { seed: 1, scale: 2 })).rejects.toThrow(/scale must be in \(0, 1\]/);
  });
});
