import { describe, expect, it } from "vitest";
import { simReportFixture, simResultFixture } from "../../testing/sim-report-fixture.js";
import { arborOverBest } from "./arbor-over-best.js";
import type { SimReport } from "./sim-report.js";

/** A report of systems with these iteration times and steps per minute. */
function report(systems: [string, number, number][]): SimReport {
  return simReportFixture("w", "agent", systems.map(([system, iterationMs, stepsPerMin]) => simResultFixture(system, iterationMs, 0, stepsPerMin)));
}

describe("arborOverBest", () => {
  const r = report([
    ["verl-like", 2000, 50],
    ["sglang-router", 1000, 120],
    ["arbor", 800, 100],
    ["oracle", 500, 300],
  ]);

  it("rollout: the best other iteration time over arbor's, the oracle left out", () => {
    expect(arborOverBest(r, false)).toBeCloseTo(1000 / 800, 12);
  });

  it("agent: arbor's steps per minute over the best other's", () => {
    expect(arborOverBest(r, true)).toBeCloseTo(100 / 120, 12);
  });

  it("is undefined without arbor or without another system", () => {
    expect(arborOverBest(report([["seer", 1, 1]]), false)).toBeUndefined();
    expect(arborOverBest(report([["arbor", 1, 1], ["oracle", 1, 1]]), true)).toBeUndefined();
  });
});
