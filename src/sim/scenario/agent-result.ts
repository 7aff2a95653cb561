// A gateway simulation's result as the report's SimSystemResult: headline figures over program end
// times, series thinned to a bounded number of points, and the completion CDF at 101 percentiles.
import type { GatewaySimResult } from "../gateway-sim.js";
import { quantile } from "./quantile.js";
import type { SeriesPoint, SimSystemResult } from "./sim-report.js";

/** Most points a series keeps in a report (the simulator samples every scrape interval). */
export const MAX_SERIES_POINTS = 400;

/** Every k-th point (and the last), so a series has at most `max` points. */
export function thin(points: readonly SeriesPoint[], max = MAX_SERIES_POINTS): SeriesPoint[] {
  if (points.length <= max) return [...points];
  const k = Math.ceil(points.length / max);
  const out = points.filter((_, i) => i % k === 0);
  const last = points[points.length - 1] as SeriesPoint;
  if (out[out.length - 1] !== last) out.push(last);
  return out;
}

/** Rates between consecutive points of a cumulative series, per second, at each interval's end. */
export function ratePerSecond(cumulative: readonly SeriesPoint[]): SeriesPoint[] {
  const out: SeriesPoint[] = [];
  for (let i = 1; i < cumulative.length; i++) {
    const a = cumulative[i - 1] as SeriesPoint;
    const b = cumulative[i] as SeriesPoint;
    if (b.tMs > a.tMs) out.push({ tMs: b.tMs, value: ((b.value - a.value) * 1000) / (b.tMs - a.tMs) });
  }
  return out;
}

/**
 * Convert one run. `requests` is the number of calls the workload issued (the sum of its programs'
 * turns): calls the run did not complete are reported as aborted, so completed + aborted = requests.
 */
export function agentSystemResult(system: string, description: string, r: GatewaySimResult, requests: number): SimSystemResult {
  const ends = [...r.programEndsMs].sort((a, b) => a - b);
  const p90 = quantile(ends, 0.9);
  const last = ends[ends.length - 1] ?? 0;
  const thinCumulative = thin(r.series.outputTokens, MAX_SERIES_POINTS + 1);
  return {
    system,
    description,
    summary: {
      requests,
      completed: r.turns,
      aborted: requests - r.turns,
      programs: r.programs,
      makespanMs: r.makespanMs,
      iterationMs: r.makespanMs,
      outputTokens: r.outputTokens,
      throughputTokensPerS: r.makespanMs > 0 ? (r.outputTokens * 1000) / r.makespanMs : 0,
      stepsPerMin: r.stepsPerMin,
      tailMs: last - p90,
      p50Ms: quantile(ends, 0.5),
      p90Ms: p90,
      p99Ms: quantile(ends, 0.99),
      preemptions: r.preemptions,
      recomputedTokens: Math.max(0, r.recomputeTokens),
      peakKvUsage: r.peakKvUsage,
      meanStaleness: 0,
    },
    series: {
      throughput: ratePerSecond(thinCumulative),
      kvUsage: Object.fromEntries(Object.entries(r.series.kvUsage).map(([k, v]) => [k, thin(v)])),
      preemptions: thin(r.series.preemptions),
      recomputedTokens: thin(r.series.recomputedTokens),
      staleness: [],
    },
    completionPercentilesMs: Array.from({ length: 101 }, (_, i) => quantile(ends, i / 100)),
  };
}
