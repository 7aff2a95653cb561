// What a training run prints and writes about its iterations: one line per iteration (mean reward and its
// components, loss, tokens, time, policy versions, the held-out score when one was due), the reward plot in the
// output directory and the summary's rows.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HeldOutScore } from "../loop/held-out-eval.js";
import type { IterationResult } from "../loop/iteration-result.js";
import { heldOutOfLine, numberField, parseMetricsLines } from "../loop/metrics-lines.js";
import { rewardPlotSvg, sparkline, type HeldOutPoint, type RewardPoint } from "./reward-plot.js";

function meanReward(r: IterationResult): number {
  return r.stats.meanReward ?? 0;
}

/** An iteration as a point of the reward curve. */
function rewardPoint(r: IterationResult): RewardPoint {
  return { iteration: r.iteration, meanReward: meanReward(r), ...(r.rewardComponents ? { components: r.rewardComponents } : {}) };
}

function rewardText(r: IterationResult): string {
  const parts = Object.entries(r.rewardComponents ?? {}).map(([n, v]) => `${n} ${v.toFixed(3)}`);
  // One component is the total itself: nothing to break down.
  return `reward ${meanReward(r).toFixed(3)}${parts.length > 1 ? ` (${parts.join(", ")})` : ""}`;
}

/** `iteration 2/6  reward 0.344 (outcome 0.406, process -0.062)  loss …  tokens …  rollout 3.1 s  train 0.9 s  policy v1 → v2`. */
export function iterationLine(r: IterationResult, of: number): string {
  const u = r.update;
  const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  const parts = [`iteration ${String(r.iteration).padStart(String(of).length)}/${of}`, rewardText(r)];
  if (u === undefined) parts.push(`rollout ${secs(r.rolloutMs)}`);
  else if (!u.stepped) {
    const why = u.external ? `the external trainer acked without new weights; ${u.trainedSamples}/${u.samples} samples with an advantage` : `all ${u.samples} samples have advantage 0`;
    parts.push(`no step (${why})`, `rollout ${secs(r.rolloutMs)}`, `policy v${u.version}`);
  } else {
    parts.push(
      // The protocol does not report an external trainer's loss.
      ...(u.external ? ["external trainer"] : [`loss ${u.loss.toFixed(4)}`, `grad ${u.gradNorm.toFixed(3)}`]),
      `tokens ${u.treeTokens} tree / ${u.flatTokens} flat (${u.trainedSamples}/${u.samples} samples)`,
      `rollout ${secs(r.rolloutMs)}`,
      `train ${secs(r.trainMs)}`,
      `policy v${r.policyVersion} → v${u.version}`,
    );
  }
  // Its own time: a held-out evaluation can take longer than the training step it follows.
  if (r.heldOut) parts.push(heldOutText(r.heldOut), ...(r.evalMs !== undefined ? [`eval ${secs(r.evalMs)}`] : []));
  return parts.join("  ");
}

/** Percentage points with one decimal. */
const pts = (x: number): string => (100 * x).toFixed(1);

/** `held-out v4 solved 37.5% ± 4.1  Δ vs v0 +6.2 ± 2.0 pts (32 tasks × 4)`: the rate, its SE and the paired difference. */
export function heldOutText(s: HeldOutScore): string {
  const rate = `held-out v${s.version} solved ${pts(s.solved.mean)}% ± ${pts(s.solved.se)}`;
  const diff = s.diff ? `  Δ vs v${s.baseVersion} ${s.diff.mean >= 0 ? "+" : ""}${pts(s.diff.mean)} ± ${pts(s.diff.se)} pts` : "";
  return `${rate}${diff} (${s.tasks} tasks × ${s.samples})`;
}

/** The line of the starting policy's held-out score, before the first iteration. */
export function heldOutStartLine(s: HeldOutScore): string {
  return `eval     ${heldOutText(s)} at temperature ${s.temperature}`;
}

/** The line of a held-out evaluation the run's stop cut short: it has no score (a partial solved rate is no measure). */
export function heldOutIncompleteLine(version: number, ended: number, total: number): string {
  return `eval     v${version} incomplete: ${ended} of ${total} held-out programs ended with an outcome before the run stopped; no score`;
}

/** The sync mode's iteration line with the batch's staleness and the versions its tokens came from (async steps). */
export function asyncStepLine(r: IterationResult, of: number): string {
  const s = r.staleness;
  const line = iterationLine(r, of).replace(/^iteration/, "step");
  return s === undefined ? line : `${line}  staleness mean ${s.mean.toFixed(2)} max ${s.max}  token versions ${s.versions.map((v) => `v${v}`).join(",")}`;
}

/** The held-out points of the plot: the starting version at iteration 0, then each scored step's. */
export function heldOutPoints(results: readonly IterationResult[], start?: HeldOutScore): HeldOutPoint[] {
  const point = (iteration: number, s: HeldOutScore): HeldOutPoint => ({ iteration, version: s.version, solved: s.solved.mean, se: s.solved.se });
  return [...(start ? [point(0, start)] : []), ...results.flatMap((r) => (r.heldOut ? [point(r.iteration, r.heldOut)] : []))];
}

/** The curve's points of the iterations before this process's: what a resumed run did before it was resumed. */
export interface EarlierPoints {
  points: RewardPoint[];
  heldOut: HeldOutPoint[];
  /** The policy version the first of them started from (null: none read). */
  firstPolicyVersion: number | null;
}

const NO_EARLIER: EarlierPoints = { points: [], heldOut: [], firstPolicyVersion: null };

/**
 * A resumed run's iterations before `first` as the plot draws them, read back from its metrics.jsonl (its lines of
 * those iterations are kept on resume, metrics-log.ts); the starting policy's held-out line is not among them (the
 * run's `heldOutStart` is). Lines that do not parse (cut by a kill) are skipped.
 */
export function earlierPlotPoints(metricsPath: string, first: number): EarlierPoints {
  const out: EarlierPoints = { points: [], heldOut: [], firstPolicyVersion: null };
  if (!existsSync(metricsPath)) return out;
  for (const { fields: r } of parseMetricsLines(readFileSync(metricsPath, "utf8"))) {
    const index = numberField(r, "index");
    if ((r.kind !== "iteration" && r.kind !== "step") || index === null || index >= first) continue;
    const components = typeof r.rewardComponents === "object" && r.rewardComponents !== null ? (r.rewardComponents as Record<string, number>) : undefined;
    out.points.push({ iteration: index, meanReward: numberField(r, "meanReward") ?? 0, ...(components ? { components } : {}) });
    out.firstPolicyVersion ??= numberField(r, "policyVersion");
    const h = heldOutOfLine(r);
    if (h) out.heldOut.push({ iteration: index, version: h.version, solved: h.solved, se: h.solvedSe ?? 0 });
  }
  return out;
}

/**
 * Write `reward.svg` (mean reward per iteration, and the held-out solved rate with error bars) into `dir`; returns
 * its path. `earlier`: a resumed run's iterations before this process's, so the curve is the whole run's.
 */
export function writeRewardPlot(dir: string, results: readonly IterationResult[], heldOutStart?: HeldOutScore, earlier: EarlierPoints = NO_EARLIER): string {
  const path = join(dir, "reward.svg");
  const points = results.map(rewardPoint);
  const held = heldOutPoints(results, heldOutStart);
  // The starting policy's point (iteration 0) first, then the earlier iterations', then this process's.
  const start = held.filter((p) => p.iteration === 0);
  writeFileSync(path, rewardPlotSvg([...earlier.points, ...points], undefined, [...start, ...earlier.heldOut, ...held.filter((p) => p.iteration !== 0)]));
  return path;
}

/**
 * Summary rows of a training run (none for a plain rollout): the whole run's, a resumed run's iterations before this
 * process's (`earlier`) included, as its reward.svg draws them.
 */
export function summaryTrainingRows(s: {
  iterations: readonly IterationResult[];
  /** The run's rollout was async: its iterations are trainer steps. */
  async?: true;
  rewardPlot?: string;
  policyVersion?: number;
  heldOut?: readonly HeldOutScore[];
  earlier?: EarlierPoints;
}): [string, string][] {
  if (s.rewardPlot === undefined) return [];
  const earlier = s.earlier ?? NO_EARLIER;
  const points: RewardPoint[] = [...earlier.points, ...s.iterations.map(rewardPoint)];
  const row = (values: number[]): string => `${(values[0] ?? 0).toFixed(3)} → ${(values[values.length - 1] ?? 0).toFixed(3)}  ${sparkline(values)}  (${values.map((x) => x.toFixed(2)).join(" ")})`;
  const names = [...new Set(points.flatMap((p) => Object.keys(p.components ?? {})))].sort();
  const from = earlier.firstPolicyVersion ?? s.iterations[0]?.policyVersion ?? 0;
  const resumed = earlier.points.length > 0 ? ` (${s.iterations.length} after the resume)` : "";
  return [
    [s.async ? "steps" : "iterations", `${points.length}${resumed}, policy v${from} → v${s.policyVersion ?? 0}`],
    ["reward", row(points.map((p) => p.meanReward))],
    // Each component's own curve: a total can rise through one part alone (e.g. fewer malformed calls).
    ...(names.length > 1 ? names.map((n): [string, string] => [`  ${n}`, row(points.map((p) => p.components?.[n] ?? 0))]) : []),
    ...heldOutRows(s.heldOut ?? []),
    ["plot", s.rewardPlot],
  ];
}

/** The summary's held-out rows: first and last version with SEs and their paired difference, then every version scored. */
function heldOutRows(scores: readonly HeldOutScore[]): [string, string][] {
  const first = scores[0];
  const last = scores[scores.length - 1];
  if (first === undefined || last === undefined) return [];
  const at = (s: HeldOutScore): string => `v${s.version} ${pts(s.solved.mean)}% ± ${pts(s.solved.se)}`;
  const diff = last.diff ? `, paired Δ ${last.diff.mean >= 0 ? "+" : ""}${pts(last.diff.mean)} ± ${pts(last.diff.se)} pts` : "";
  return [
    ["held-out", `solved ${at(first)} → ${at(last)}${diff} (${first.tasks} tasks × ${first.samples} samples, temperature ${first.temperature}, never trained on)`],
    ...(scores.length > 2 ? ([["  versions", `${scores.map((s) => `v${s.version} ${pts(s.solved.mean)}%`).join("  ")}  ${sparkline(scores.map((s) => s.solved.mean))}`]] as [string, string][]) : []),
  ];
}
