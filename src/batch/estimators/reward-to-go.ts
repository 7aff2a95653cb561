// Reward-to-go: each chunk (call) is credited with the discounted rewards from itself to the end,
// RTG_k = Σ_{j≥k} γ^{j−k} r_j, minus the group's mean total reward. Per-chunk rewards r_j are the program's
// `step:<j>` reward components; the rest of the total (total − Σ steps) arrives with the last chunk.
import { ArborError } from "../../core/errors.js";
import type { ProgramOutcome } from "../batch-sample.js";
import { makeEstimator, mean, type Estimator } from "./estimator.js";
import { validateLossSpec } from "./loss-spec.js";

/** Options of {@link createRewardToGo}. */
export interface RewardToGoOptions {
  /** c of dual-clip PPO (LossSpec.clipRatioC; default 3 as verl's clip_ratio_c). */
  clipRatioC?: number;
  gamma?: number;
  clip?: number;
}

/** Discounted reward-to-go of each chunk of one program. */
export function rewardsToGo(p: ProgramOutcome, gamma: number): number[] {
  const r = p.stepRewards ? p.stepRewards.slice() : new Array<number>(p.chunkCount).fill(0);
  if (r.length !== p.chunkCount) throw new ArborError(`reward-to-go: program '${p.programId}' has ${r.length} step rewards for ${p.chunkCount} chunks`, "batch");
  if (p.chunkCount > 0) r[p.chunkCount - 1] = (r[p.chunkCount - 1] as number) + p.reward - r.reduce((a, b) => a + b, 0);
  const out = new Array<number>(p.chunkCount);
  let acc = 0;
  for (let k = p.chunkCount - 1; k >= 0; k--) {
    acc = (r[k] as number) + gamma * acc;
    out[k] = acc;
  }
  return out;
}

/** The reward-to-go estimator (token ratio, clip 1 ± 0.2, token-level normaliser). */
export function createRewardToGo(opts: RewardToGoOptions = {}): Estimator {
  const gamma = opts.gamma ?? 1;
  if (!(gamma > 0 && gamma <= 1)) throw new ArborError(`reward-to-go: gamma must be in (0, 1], got ${gamma}`, "batch");
  const clip = opts.clip ?? 0.2;
  return makeEstimator({
    name: "reward-to-go",
    loss: validateLossSpec({ ratio: "token", objective: "clip", epsLow: clip, epsHigh: clip, normaliser: "token-mean", clipRatioC: opts.clipRatioC ?? 3 }),
    advantages: (programs) => {
      const baseline = mean(programs.map((p) => p.reward));
      return programs.map((p) => rewardsToGo(p, gamma).map((g) => g - baseline));
    },
  });
}
