// A finished real run as a SimReport, so `arbor report <run dir>` draws it like a simulation: one system (the run),
// requests = its model calls (how each finished), programs = its programs, the completion CDF over program end times
// since their iteration started (the iterations pooled), throughput from each call's output tokens spread over the
// call's time, staleness from the async trainer steps of metrics.jsonl. What a real run does not record (KV usage
// per engine, preemptions, recomputed tokens) is left empty and said so in the workload's scale, never drawn as
// zero. The iteration time is the mean over its iterations, each told apart by its groups' recorded iteration. A
// sync run of several iterations is one store run per iteration (`<id>-it<k>`) in stores written before a run had
// one id: they are read together. A run's held-out evaluation programs (its held-out groups, or in older stores a
// store run of their own) are no part of its rollout and are left out; the scale says how many calls they made. So
// are the programs of an iteration a kill cut, which the resumed run rolled out again (a later Group.attempt).
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ArborError } from "../../core/errors.js";
import type { Call, Group, Trajectory } from "../../core/types.js";
import { numberField, parseMetricsLines } from "../../loop/metrics-lines.js";
import { quantile } from "../../sim/scenario/quantile.js";
import { SIM_REPORT_FORMAT, type SeriesPoint, type SimReport } from "../../sim/scenario/sim-report.js";
import { runTrajectories } from "../../store/held-out-groups.js";
import type { RunRecord, TrajectoryStore } from "../../store/trajectory-store.js";

/** Largest metrics.jsonl read. */
const MAX_METRICS_BYTES = 64 * 1024 * 1024;
/** Most throughput buckets drawn (the bucket width is the smallest round width that keeps under it). */
const MAX_BUCKETS = 200;
const BUCKET_WIDTHS_MS = [100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000];
const NOT_RECORDED = "not recorded by a real run";

/** Options of {@link runSimReport}. */
export interface RunReportOptions {
  /** How messages and the report's sources name the store. */
  label: string;
  /** The run's output folder (its metrics.jsonl); absent: no staleness series. */
  runDir?: string;
  /** The run id (as `arbor run` printed it; without `-it<k>`); default: the store's latest run. */
  runId?: string;
}

/** A held-out evaluation's store run of a store written before held-out programs joined their run's id. */
const isHeldOut = (r: RunRecord): boolean => r.name.endsWith("(held-out evaluation)");
/** The id of the run an iteration's store run belongs to. */
const baseId = (id: string): string => id.replace(/-it\d+(-r\d+)?$/, "");

// Loops, not Math.min(...xs): a large run has more calls than a call's arguments may be.
const minOf = (xs: Iterable<number>, start = Infinity): number => {
  let m = start;
  for (const x of xs) if (x < m) m = x;
  return m;
};
const maxOf = (xs: Iterable<number>, start = -Infinity): number => {
  let m = start;
  for (const x of xs) if (x > m) m = x;
  return m;
};

/** Output tokens per second in fixed buckets, each call's tokens spread evenly over its [start, end]. */
export function throughputSeries(calls: readonly Call[], t0: number, spanMs: number): SeriesPoint[] {
  const width = BUCKET_WIDTHS_MS.find((w) => spanMs / w <= MAX_BUCKETS) ?? Math.ceil(spanMs / MAX_BUCKETS);
  const n = Math.max(1, Math.ceil(spanMs / width));
  const tokens = new Array<number>(n).fill(0);
  const bucket = (t: number): number => Math.min(n - 1, Math.max(0, Math.floor(t / width)));
  for (const c of calls) {
    const k = c.outputTokenIds.length;
    if (k === 0) continue;
    const a = c.timings.start - t0;
    const b = Math.max(a, c.timings.end - t0);
    if (b === a) {
      tokens[bucket(a)]! += k;
      continue;
    }
    // The share of the call's time that falls in each bucket it spans.
    for (let i = bucket(a); i <= bucket(b); i++) {
      const overlap = Math.min(b, (i + 1) * width) - Math.max(a, i * width);
      if (overlap > 0) tokens[i]! += (k * overlap) / (b - a);
    }
  }
  return tokens.map((x, i) => ({ tMs: i * width, value: x / (width / 1000) }));
}

interface RunConfigFacts {
  seed?: number;
  engines?: unknown[];
  env?: { name?: string };
  model?: { path?: string };
  rollout?: { groupSize?: number; mode?: string };
  gateway?: { routing?: string };
}

function configOf(run: RunRecord): RunConfigFacts {
  try {
    return JSON.parse(run.configJson) as RunConfigFacts;
  } catch {
    return {};
  }
}

/** The async trainer steps' staleness (metrics.jsonl lines of kind `step` of these runs), time since t0. */
function stalenessSeries(runDir: string | undefined, runIds: ReadonlySet<string>, t0: number): { points: SeriesPoint[]; source: string } {
  if (runDir === undefined) return { points: [], source: "metrics.jsonl: not given" };
  const path = join(runDir, "metrics.jsonl");
  if (!existsSync(path)) return { points: [], source: `${path}: none` };
  const size = statSync(path).size;
  if (size > MAX_METRICS_BYTES) throw new ArborError(`report: ${path} is ${size} bytes, more than the ${MAX_METRICS_BYTES} read`, "config");
  const points: SeriesPoint[] = [];
  for (const { fields: r } of parseMetricsLines(readFileSync(path, "utf8"))) {
    if (r.kind !== "step" || typeof r.runId !== "string" || !runIds.has(r.runId)) continue;
    const time = numberField(r, "time");
    const staleness = numberField(r, "stalenessMean");
    if (time !== null && staleness !== null) points.push({ tMs: time - t0, value: staleness });
  }
  return { points: points.sort((a, b) => a.tMs - b.tMs), source: path };
}

/**
 * A run's training trajectories per iteration: by their groups' recorded iteration (a sync run's store run holds
 * them all), else one part per store run (an async run; a store written when each iteration was a store run of its
 * own). The first part of a store run starts with it; a later one with its first program.
 */
function iterationParts(perRun: readonly { run: RunRecord; groups: readonly Group[]; training: readonly Trajectory[] }[]): { startedAt: number; trajectories: Trajectory[] }[] {
  const parts: { startedAt: number; trajectories: Trajectory[] }[] = [];
  for (const { run, groups, training } of perRun) {
    const iterationOf = new Map(groups.map((g) => [g.id, g.iteration]));
    const byIteration = new Map<number | undefined, Trajectory[]>();
    for (const t of training) {
      const k = iterationOf.get(t.program.groupId);
      const list = byIteration.get(k);
      if (list) list.push(t);
      else byIteration.set(k, [t]);
    }
    const keys = [...byIteration.keys()].sort((a, b) => (a ?? 0) - (b ?? 0));
    keys.forEach((k, i) => parts.push({ startedAt: i === 0 ? run.startedAt : Infinity, trajectories: byIteration.get(k)! }));
  }
  return parts;
}

/** The run's programs, calls and metrics as a SimReport. Throws an {@link ArborError} for an unknown or empty run. */
export async function runSimReport(store: TrajectoryStore, o: RunReportOptions): Promise<SimReport> {
  const all = (await store.listRuns()).filter((r) => !isHeldOut(r));
  if (all.length === 0) throw new ArborError(`report: ${o.label} holds no run`, "config");
  const bases = [...new Set(all.map((r) => baseId(r.id)))];
  let id = o.runId;
  if (id === undefined) {
    // The latest run: the one whose last store run started last.
    id = baseId([...all].sort((a, b) => a.startedAt - b.startedAt || a.id.localeCompare(b.id)).at(-1)!.id);
  } else if (!bases.includes(id)) throw new ArborError(`report: run '${id}' is not in ${o.label} (runs: ${bases.join(", ")})`, "config");
  const runs = all.filter((r) => baseId(r.id) === id).sort((a, b) => a.startedAt - b.startedAt);
  const perRun = await Promise.all(runs.map(async (r) => ({ run: r, ...(await runTrajectories(store, r.id)) })));
  const trajectories: Trajectory[] = perRun.flatMap((x) => x.training);
  const callsOf = (ts: readonly Trajectory[]): number => ts.reduce((m, t) => m + t.calls.length, 0);
  const heldOutCalls = perRun.reduce((n, x) => n + callsOf(x.heldOut), 0);
  const cutCalls = perRun.reduce((n, x) => n + callsOf(x.superseded), 0);
  const calls = trajectories.flatMap((t) => t.calls);
  if (calls.length === 0) throw new ArborError(`report: run '${id}' in ${o.label} has no model calls to report`, "config");

  const t0 = minOf(calls.map((c) => c.timings.start), minOf([...runs.map((r) => r.startedAt), ...trajectories.map((t) => t.program.createdAt)]));
  const endOf = (t: Trajectory): number | undefined => t.program.endedAt ?? (t.program.state === "terminated" ? maxOf(t.calls.map((c) => c.timings.end), t.program.createdAt) : undefined);
  const lastEnd = (ts: readonly Trajectory[]): number => maxOf(ts.flatMap((t) => t.calls.map((c) => c.timings.end)), maxOf(ts.map((t) => endOf(t) ?? -Infinity)));
  const makespanMs = lastEnd(trajectories) - t0;
  const parts = iterationParts(perRun).map((x) => ({ start: minOf(x.trajectories.map((t) => t.program.createdAt), x.startedAt), trajectories: x.trajectories }));
  const iterations = parts.map((x) => lastEnd(x.trajectories) - x.start);
  const iterationMs = iterations.reduce((a, b) => a + b, 0) / Math.max(1, iterations.length);
  // Each rollout's completion times from its own start, pooled over the iterations (the tail is a rollout's, as in
  // a simulation's single iteration): since the run's start, a later iteration's programs would all be its tail.
  const programEnds = parts
    .flatMap((x) => x.trajectories.map(endOf).flatMap((end) => (end === undefined ? [] : [end - x.start])))
    .sort((a, b) => a - b);
  if (programEnds.length === 0) throw new ArborError(`report: run '${id}' in ${o.label} has no ended program (is it still running?)`, "config");

  const percentiles = Array.from({ length: 101 }, (_, i) => quantile(programEnds, i / 100));
  const outputTokens = calls.reduce((n, c) => n + c.outputTokenIds.length, 0);
  const completed = calls.filter((c) => c.finishReason === "stop" || c.finishReason === "length").length;
  const span = Math.max(makespanMs, 1);
  const staleness = stalenessSeries(o.runDir, new Set(runs.map((r) => r.id)), t0);
  const meanStaleness = staleness.points.length > 0 ? staleness.points.reduce((n, p) => n + p.value, 0) / staleness.points.length : 0;

  const first = runs[0]!;
  const cfg = configOf(first);
  const name = first.name;
  const ids = runs.map((r) => r.id).join(", ");
  const others = bases.length - 1;
  const scale: Record<string, number | string> = {
    runId: id,
    storeRuns: runs.length,
    programs: trajectories.length,
    calls: calls.length,
    kvUsage: NOT_RECORDED,
    preemptions: NOT_RECORDED,
    recomputedTokens: NOT_RECORDED,
  };
  // The engines computed them too (the throughput plot's quiet stretch in a sync run is often an evaluation).
  if (heldOutCalls > 0) scale.heldOutCalls = `${heldOutCalls}, of the held-out evaluation: in none of these figures`;
  if (cutCalls > 0) scale.cutCalls = `${cutCalls}, of what a kill cut and the resumed run rolled out again: in none of these figures`;
  if (Array.isArray(cfg.engines)) scale.engines = cfg.engines.length;
  if (typeof cfg.rollout?.groupSize === "number") scale.groupSize = cfg.rollout.groupSize;
  if (typeof cfg.rollout?.mode === "string") scale.rolloutMode = cfg.rollout.mode;
  if (typeof cfg.env?.name === "string") scale.env = cfg.env.name;
  if (typeof cfg.model?.path === "string") scale.model = cfg.model.path;
  const routing = typeof cfg.gateway?.routing === "string" ? `, routing ${cfg.gateway.routing}` : "";
  return {
    format: SIM_REPORT_FORMAT,
    workload: {
      name,
      kind: "replay",
      description: `real Arbor run ${id} read from its store: requests are its model calls, the completion CDF is over its programs' end times since their iteration's start${parts.length > 1 ? ` (${parts.length} iterations pooled)` : ""}${others > 0 ? ` (the store holds ${others} other run${others === 1 ? "" : "s"}; --run picks one)` : ""}`,
      sources: [`store ${o.label}: run${runs.length === 1 ? "" : "s"} ${ids}`, `staleness: ${staleness.source}`],
      scale,
    },
    seed: typeof cfg.seed === "number" && Number.isFinite(cfg.seed) ? cfg.seed : 0,
    baseline: name,
    systems: [
      {
        system: name,
        description: `the real run ${id}${routing}, ${trajectories.length} programs in ${runs.length} store run${runs.length === 1 ? "" : "s"}`,
        summary: {
          requests: calls.length,
          completed,
          aborted: calls.length - completed,
          programs: trajectories.length,
          makespanMs,
          iterationMs,
          outputTokens,
          throughputTokensPerS: outputTokens / (span / 1000),
          stepsPerMin: calls.length / (span / 60_000),
          tailMs: percentiles[100]! - percentiles[90]!,
          p50Ms: percentiles[50]!,
          p90Ms: percentiles[90]!,
          p99Ms: percentiles[99]!,
          preemptions: 0,
          recomputedTokens: 0,
          peakKvUsage: 0,
          meanStaleness,
        },
        series: { throughput: throughputSeries(calls, t0, span), kvUsage: {}, preemptions: [], recomputedTokens: [], staleness: staleness.points },
        completionPercentilesMs: percentiles,
      },
    ],
    ratios: [{ system: name, speedup: 1, throughput: 1, tailReduction: 0 }],
  };
}
