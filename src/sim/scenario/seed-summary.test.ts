import { describe, expect, it } from "vitest";
import { simReportFixture, simResultFixture } from "../../testing/sim-report-fixture.js";
import { TINY_ROLLOUT_YAML } from "../../testing/tiny-rollout-workload.js";
import { parseWorkload } from "./workload-file.js";
import { runSim } from "./run-sim.js";
import { seedSpread, summarizeSeeds } from "./seed-summary.js";

describe("seedSpread", () => {
  it("gives the mean, the sample standard deviation and the range, the values in their order", () => {
    expect(seedSpread([3, 1, 2])).toEqual({ values: [3, 1, 2], mean: 2, sd: 1, min: 1, max: 3 });
    expect(seedSpread([5])).toEqual({ values: [5], mean: 5, sd: 0, min: 5, max: 5 });
    expect(() => seedSpread([])).toThrow(/no values/);
  });
});

describe("summarizeSeeds", () => {
  it("sums up each system over the seeds from the seeds' own reports, arbor over the best other included", async () => {
    const scenario = parseWorkload(TINY_ROLLOUT_YAML, "tiny.yaml");
    const systems = ["verl-like", "seer", "arbor"];
    const reports = [await runSim(scenario, { systems, seed: 1, scale: 1 }), await runSim(scenario, { systems, seed: 2, scale: 1 })];
    const s = summarizeSeeds(reports);
    expect(s.seeds).toEqual([1, 2]);
    expect(s.baseline).toBe("verl-like");
    expect(s.systems.map((x) => x.system)).toEqual(systems);
    const seer = s.systems[1];
    expect(seer?.iterationMs.values).toEqual(reports.map((r) => r.systems[1]?.summary.iterationMs));
    expect(seer?.speedup.values).toEqual(reports.map((r) => r.ratios[1]?.speedup));
    expect(s.systems[0]?.speedup).toMatchObject({ mean: 1, sd: 0 });
    // The seeds draw different requests, so the figures differ between them.
    expect(seer?.iterationMs.sd).toBeGreaterThan(0);
    const best = reports.map((r) => Math.min(...r.systems.filter((x) => x.system !== "arbor").map((x) => x.summary.iterationMs)) / (r.systems[2]?.summary.iterationMs as number));
    expect(s.arborOverBest?.values).toEqual(best);
  });

  it("refuses reports of other systems or another scale, and leaves out arbor over best without arbor", async () => {
    const scenario = parseWorkload(TINY_ROLLOUT_YAML, "tiny.yaml");
    const a = await runSim(scenario, { systems: ["verl-like", "seer"], seed: 1, scale: 1 });
    const b = await runSim(scenario, { systems: ["verl-like", "oracle"], seed: 2, scale: 1 });
    expect(() => summarizeSeeds([a, b])).toThrow(/seed 2 is not of the same workload, systems and scale as seed 1/);
    expect(() => summarizeSeeds([])).toThrow(/no report/);
    expect(summarizeSeeds([a]).arborOverBest).toBeUndefined();
  });

  it("judges arbor by agent steps per minute on agent workloads and replays (their programs), by iteration time on rollouts", () => {
    // arbor: slower run (1,200 vs 1,000 ms) but more steps per minute (120 vs 100).
    const systems = [simResultFixture("sglang-router", 1000, 100, 100), simResultFixture("arbor", 1200, 100, 120)];
    expect(summarizeSeeds([simReportFixture("w", "agent", systems)]).arborOverBest?.mean).toBeCloseTo(1.2);
    expect(summarizeSeeds([simReportFixture("w", "replay", systems)]).arborOverBest?.mean).toBeCloseTo(1.2);
    expect(summarizeSeeds([simReportFixture("w", "rollout", systems)]).arborOverBest?.mean).toBeCloseTo(1000 / 1200);
  });
});
