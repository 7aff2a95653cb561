// Weighted composition of reward functions into one Reward: total = Σ weight·component, with each
// component stored unweighted so analysis can re-weight without recomputing.
import { ArborError } from "../core/errors.js";
import type { Reward } from "../core/types.js";
import type { RewardContext, RewardFn } from "./reward-fn.js";

export interface WeightedRewardFn {
  fn: RewardFn;
  weight: number;
}

/** A composition of reward functions; `compute` yields the full {@link Reward}. */
export interface ComposedReward {
  /** Component names, in composition order. */
  readonly names: string[];
  compute(ctx: RewardContext): Reward;
}

/**
 * Compose reward functions. Throws an {@link ArborError} for an empty list, a duplicate name or a
 * non-finite weight; `compute` throws if a component returns a non-finite value.
 */
export function composeRewards(fns: WeightedRewardFn[]): ComposedReward {
  if (fns.length === 0) throw new ArborError("reward: need at least one reward function", "reward");
  const names = new Set<string>();
  for (const { fn, weight } of fns) {
    if (names.has(fn.name)) throw new ArborError(`reward.${fn.name}: listed twice`, "reward");
    names.add(fn.name);
    if (typeof weight !== "number" || !Number.isFinite(weight)) {
      throw new ArborError(`reward.${fn.name}: weight must be a finite number, got ${String(weight)}`, "reward");
    }
  }
  return {
    names: [...names],
    compute(ctx: RewardContext): Reward {
      let total = 0;
      const components: Record<string, number> = {};
      for (const { fn, weight } of fns) {
        const value = fn.compute(ctx);
        if (typeof value !== "number" || !Number.isFinite(value)) {
          throw new ArborError(
            `reward.${fn.name}: returned ${String(value)} for program '${ctx.trajectory.program.id}'`,
            "reward",
          );
        }
        components[fn.name] = value;
        total += weight * value;
      }
      return { total, components };
    },
  };
}
