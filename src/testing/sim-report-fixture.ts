// Small SimReports for tests of what reads them (the reproduction table, the report files, reuse of a report).
import { SIM_REPORT_FORMAT, type SimReport, type SimSystemResult } from "../sim/scenario/sim-report.js";

/** One system's result with the given iteration, tail and steps per minute; every other figure plausible. */
export function simResultFixture(system: string, iterationMs: number, tailMs: number, stepsPerMin = 0): SimSystemResult {
  const summary = { requests: 10, completed: 10, aborted: 0, programs: 2, makespanMs: iterationMs, iterationMs, outputTokens: 1000, throughputTokensPerS: 1e6 / iterationMs, stepsPerMin, tailMs, p50Ms: iterationMs / 2, p90Ms: iterationMs - tailMs, p99Ms: iterationMs * 0.99, preemptions: 3, recomputedTokens: 40, peakKvUsage: 0.9, meanStaleness: 0 };
  return { system, description: system, summary, series: { throughput: [], kvUsage: {}, preemptions: [], recomputedTokens: [], staleness: [] }, completionPercentilesMs: Array.from({ length: 101 }, (_, i) => (iterationMs * i) / 100) };
}

/** A report of these systems (the first is the baseline), ratios computed from their iteration and tail. */
export function simReportFixture(name: string, kind: SimReport["workload"]["kind"], systems: SimSystemResult[]): SimReport {
  const base = systems[0] as SimSystemResult;
  return {
    format: SIM_REPORT_FORMAT,
    workload: { name, kind, description: `${name} workload`, sources: ["a paper, Table 3"], scale: { engines: 4 } },
    seed: 1,
    baseline: base.system,
    systems,
    ratios: systems.map((s) => ({ system: s.system, speedup: base.summary.iterationMs / s.summary.iterationMs, throughput: 1, tailReduction: 1 - s.summary.tailMs / base.summary.tailMs })),
  };
}

