// Reward plugins by name, and the composition described by a config's `reward` weights.
import { ArborError } from "../core/errors.js";
import { composeRewards, type ComposedReward } from "./compose.js";
import { createOutcomeReward } from "./outcome.js";
import type { RewardFn } from "./reward-fn.js";

const FACTORIES: Record<string, () => RewardFn> = {
  outcome: createOutcomeReward,
};

/** Names of the registered reward functions. */
export function rewardFnNames(): string[] {
  return Object.keys(FACTORIES);
}

/** Create a reward function by name. Throws an {@link ArborError} naming the known ones for an unknown name. */
export function createRewardFn(name: string): RewardFn {
  const factory = Object.hasOwn(FACTORIES, name) ? FACTORIES[name] : undefined;
  if (!factory) throw new ArborError(`reward: unknown reward function '${name}' (known: ${rewardFnNames().join(", ")})`, "config");
  return factory();
}

/** Compose the rewards of a config's `reward` section: `{ name: weight }`, e.g. `{ outcome: 1 }`. */
export function createRewardFromConfig(weights: Record<string, number>): ComposedReward {
  return composeRewards(Object.entries(weights).map(([name, weight]) => ({ fn: createRewardFn(name), weight })));
}
