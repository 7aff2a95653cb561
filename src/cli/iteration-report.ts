// What a training run prints and writes about its iterations: one line per iteration (mean reward, loss,
// tokens, time, policy versions), the reward plot in the output directory and the summary's rows.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { rewardPlotSvg, sparkline } from "./reward-plot.js";
import type { IterationResult, RunSummary } from "./run.js";

function meanReward(r: IterationResult): number {
  return r.stats.meanReward ?? 0;
}

/** `iteration 2/6  reward 0.344  loss …  tokens …  rollout 3.1 s  train 0.9 s  policy v1 → v2`. */
export function iterationLine(r: IterationResult, of: number): string {
  const u = r.update;
  const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  const parts = [`iteration ${String(r.iteration).padStart(String(of).length)}/${of}`, `reward ${meanReward(r).toFixed(3)}`];
  if (u === undefined) parts.push(`rollout ${secs(r.rolloutMs)}`);
  else if (!u.stepped) parts.push(`no step (all ${u.samples} samples have advantage 0)`, `rollout ${secs(r.rolloutMs)}`, `policy v${u.version}`);
  else {
    parts.push(
      `loss ${u.loss.toFixed(4)}`,
      `grad ${u.gradNorm.toFixed(3)}`,
      `tokens ${u.treeTokens} tree / ${u.flatTokens} flat (${u.trainedSamples}/${u.samples} samples)`,
      `rollout ${secs(r.rolloutMs)}`,
      `train ${secs(r.trainMs)}`,
      `policy v${r.policyVersion} → v${u.version}`,
    );
  }
  return parts.join("  ");
}

/** Write `reward.svg` (mean reward per iteration) into `dir`; returns its path. */
export function writeRewardPlot(dir: string, results: readonly IterationResult[]): string {
  const path = join(dir, "reward.svg");
  writeFileSync(path, rewardPlotSvg(results.map((r) => ({ iteration: r.iteration, meanReward: meanReward(r) }))));
  return path;
}

/** Summary rows of a training run (none for a plain rollout). */
export function summaryTrainingRows(s: RunSummary): [string, string][] {
  if (s.rewardPlot === undefined) return [];
  const rewards = s.iterations.map(meanReward);
  const first = rewards[0] ?? 0;
  const last = rewards[rewards.length - 1] ?? 0;
  return [
    ["iterations", `${s.iterations.length}, policy v0 → v${s.policyVersion ?? 0}`],
    ["reward", `${first.toFixed(3)} → ${last.toFixed(3)}  ${sparkline(rewards)}  (${rewards.map((x) => x.toFixed(2)).join(" ")})`],
    ["plot", s.rewardPlot],
  ];
}
