// GRPO group-relative advantages (DeepSeekMath; verl's `compute_grpo_outcome_advantage`): each
// rollout's reward normalised by its group's mean and standard deviation.
import { ArborError } from "../core/errors.js";

/**
 * Advantages `(r_i − mean) / (std + eps)` for one group's rewards.
 *
 * `std` is the unbiased sample standard deviation (divisor n−1), as `torch.std` computes it by
 * default and as verl uses it. A group whose rewards are all equal gets exactly-zero advantages.
 *
 * A group of one gets advantage 0. verl's `compute_grpo_outcome_advantage` instead sets mean 0 and std 1
 * for a singleton, so its advantage is the raw reward r/(1 + eps). Arbor does not, because that number is
 * not a GRPO advantage: it has no baseline (with rewards in [0, 1] every sampled token of a singleton is
 * pushed up, right or wrong), it is in reward units rather than group standard deviations, so it is on a
 * different scale from every other group's advantages in the same batch, and it silently depends on how
 * the reward is offset. A group of one carries no relative signal, so it contributes nothing; use
 * `rollout.groupSize` ≥ 2 (a group shrinks to one when its other programs were dropped or failed).
 * Throws an {@link ArborError} on a non-finite reward or a negative eps.
 */
export function grpoAdvantages(rewards: readonly number[], eps = 1e-6): number[] {
  if (!(eps >= 0) || !Number.isFinite(eps)) throw new ArborError(`grpo: eps must be a finite number >= 0, got ${eps}`, "batch");
  rewards.forEach((r, i) => {
    if (typeof r !== "number" || !Number.isFinite(r)) throw new ArborError(`grpo: rewards[${i}] must be finite, got ${String(r)}`, "batch");
  });
  const n = rewards.length;
  // Equal rewards carry no signal; rounding in the mean (0.7·3/3 ≠ 0.7) would otherwise leak ~1e-10 / eps.
  if (n < 2 || rewards.every((r) => r === rewards[0])) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const variance = rewards.reduce((a, r) => a + (r - mean) * (r - mean), 0) / (n - 1);
  const std = Math.sqrt(variance);
  return rewards.map((r) => (r - mean) / (std + eps));
}
