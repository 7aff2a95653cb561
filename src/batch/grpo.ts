// GRPO group-relative advantages (DeepSeekMath; verl's `compute_grpo_outcome_advantage`): each
// rollout's reward normalised by its group's mean and standard deviation.
import { ArborError } from "../core/errors.js";

/**
 * Advantages `(r_i − mean) / (std + eps)` for one group's rewards.
 *
 * `std` is the unbiased sample standard deviation (divisor n−1), as `torch.std` computes it by
 * default and as verl uses it. A group of one has no spread to normalise against, so its advantage
 * is 0 (verl instead passes the raw reward through for singleton groups); a group whose rewards are
 * all equal gets exactly-zero advantages. Throws an {@link ArborError} on a non-finite reward or a
 * negative eps.
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
