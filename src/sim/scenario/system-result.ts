// Turns a rollout simulation's result and trace into the report's SimSystemResult: the summary, series
// thinned to a drawable number of points, and the completion CDF at 101 percentiles.
import { ArborError } from "../../core/errors.js";
import type { RolloutSimResult } from "../rollout-sim.js";
import type { SeriesPoint, SimSystemResult } from "./sim-report.js";

/** Points per series at most (a report draws a few hundred; a full-scale run samples thousands). */
export const MAX_SERIES_POINTS = 240;

/** The p-th percentile (nearest rank) of ascending `sorted`, p in 0..100; 0 for an empty list. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] as number;
}

/** Merge runs of `k` periods so at most MAX_SERIES_POINTS remain. */
function stride(n: number): number {
  return Math.max(1, Math.ceil(n / MAX_SERIES_POINTS));
}

export interface RolloutResultInput {
  system: string;
  description: string;
  /** Requests and groups the workload issued (counted from the workload, not from the run). */
  requests: number;
  groups: number;
  result: RolloutSimResult;
}

/** Build one system's report entry; throws when the run did not account for every request. */
export function rolloutSystemResult(i: RolloutResultInput): SimSystemResult {
  const { result: r } = i;
  const t = r.trace;
  if (t.completed + t.aborted !== i.requests) {
    throw new ArborError(`sim ${i.system}: ${t.completed} completed + ${t.aborted} aborted ≠ ${i.requests} requests issued`, "internal");
  }
  const ends = [...t.endedMs].sort((a, b) => a - b);
  const iterations = Math.max(1, r.batches.length);
  const mean = (f: (b: (typeof r.batches)[number]) => number): number => r.batches.reduce((a, b) => a + f(b), 0) / iterations;
  const tokens = r.outputTokens;
  const staleTokens = r.batches.reduce((a, b) => a + b.batch.meanStaleness * b.batch.tokens, 0);

  const k = stride(t.outputTokensPerPeriod.length);
  const throughput: SeriesPoint[] = [];
  for (let s = 0; s < t.outputTokensPerPeriod.length; s += k) {
    const slice = t.outputTokensPerPeriod.slice(s, s + k);
    const sum = slice.reduce((a, b) => a + b, 0);
    throughput.push({ tMs: s * t.sampleMs, value: sum / ((slice.length * t.sampleMs) / 1000) });
  }
  const ks = stride(t.kvUsage.length);
  const at = (j: number): number => (j + 1) * t.sampleMs;
  const kvUsage: Record<string, SeriesPoint[]> = {};
  t.engines.forEach((name, e) => {
    const pts: SeriesPoint[] = [];
    for (let j = 0; j < t.kvUsage.length; j += ks) pts.push({ tMs: at(j), value: (t.kvUsage[j] as number[])[e] as number });
    kvUsage[name] = pts;
  });
  const cumulative = (xs: readonly number[]): SeriesPoint[] => {
    const pts: SeriesPoint[] = [];
    for (let j = 0; j < xs.length; j += ks) pts.push({ tMs: at(j), value: xs[j] as number });
    return pts;
  };
  return {
    system: i.system,
    description: i.description,
    summary: {
      requests: i.requests,
      completed: t.completed,
      aborted: t.aborted,
      programs: i.groups,
      makespanMs: r.makespanMs,
      iterationMs: mean((b) => b.rolloutMs),
      outputTokens: tokens,
      throughputTokensPerS: r.makespanMs === 0 ? 0 : tokens / (r.makespanMs / 1000),
      stepsPerMin: r.makespanMs === 0 ? 0 : t.completed / (r.makespanMs / 60_000),
      tailMs: mean((b) => b.tailMs),
      p50Ms: percentile(ends, 50),
      p90Ms: percentile(ends, 90),
      p99Ms: percentile(ends, 99),
      preemptions: r.preemptions,
      recomputedTokens: t.recomputedTokensTotal,
      peakKvUsage: t.peakKvUsage,
      meanStaleness: tokens === 0 ? 0 : staleTokens / tokens,
    },
    series: {
      throughput,
      kvUsage,
      preemptions: cumulative(t.preemptions),
      recomputedTokens: cumulative(t.recomputedTokens),
      staleness: r.batches.map((b) => ({ tMs: b.takenAtMs, value: b.batch.meanStaleness })),
    },
    completionPercentilesMs: Array.from({ length: 101 }, (_, p) => percentile(ends, p)),
  };
}
