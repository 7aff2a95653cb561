// Reward plugins by name, and the composition described by a config's `reward` section: weights by
// name, `stepRewards`, per-function `options`, and the user's `custom` functions (custom-reward.ts; loaded
// by the caller, loading is asynchronous). The judge reward also needs a way to reach the judge model
// (a `JudgeChat`, normally `createGatewayChat`), which only the caller can give.
import { ArborError } from "../core/errors.js";
import { composeRewards, type ComposedReward, type WeightedRewardFn } from "./compose.js";
import { createCompletionTimeReward, type CompletionTimeOptions } from "./completion-time.js";
import type { JudgeChat } from "./judge/gateway-chat.js";
import { createJudgeReward, type JudgeRewardOptions } from "./judge/judge-reward.js";
import { createOutcomeReward } from "./outcome.js";
import { createProcessReward, type ProcessRewardOptions } from "./process.js";
import type { RewardFn } from "./reward-fn.js";

/** Options of every reward function, by name. */
export interface RewardOptions {
  process?: ProcessRewardOptions;
  "completion-time"?: CompletionTimeOptions;
  judge?: JudgeRewardOptions;
}

/** What a factory gets: its options and the run's dependencies. */
export interface RewardDeps {
  options?: RewardOptions;
  /** How the judge reward reaches its model (through the gateway). */
  judgeChat?: JudgeChat;
  /** The config's `reward.custom` functions, loaded (custom-reward.ts `loadCustomRewards`), with their weights. */
  custom?: readonly WeightedRewardFn[];
}

const FACTORIES: Record<string, (deps: RewardDeps) => RewardFn> = {
  outcome: () => createOutcomeReward(),
  process: (d) => createProcessReward(d.options?.process),
  "completion-time": (d) => createCompletionTimeReward(d.options?.["completion-time"]),
  judge: (d) => {
    if (!d.options?.judge) throw new ArborError("reward.judge: needs options.judge (at least the judge model)", "config");
    if (!d.judgeChat) throw new ArborError("reward.judge: needs a gateway to reach the judge model (none was given)", "config");
    return createJudgeReward(d.judgeChat, d.options.judge);
  },
};

/** Names of the registered reward functions. */
export function rewardFnNames(): string[] {
  return Object.keys(FACTORIES);
}

/** Create a reward function by name. Throws an {@link ArborError} naming the known ones for an unknown name. */
export function createRewardFn(name: string, deps: RewardDeps = {}): RewardFn {
  const factory = Object.hasOwn(FACTORIES, name) ? FACTORIES[name] : undefined;
  if (!factory) throw new ArborError(`reward: unknown reward function '${name}' (known: ${rewardFnNames().join(", ")})`, "config");
  return factory(deps);
}

/** Keys of a `reward` section that are settings, not weights. */
const SETTINGS = new Set(["stepRewards", "options", "custom"]);

/**
 * Compose the rewards of a config's `reward` section: `{ name: weight, …, stepRewards?, options? }`,
 * e.g. `{ outcome: 1, process: 0.2 }`. Absent weights are skipped; a weight of 0 keeps the component
 * (stored, not counted).
 */
export function createRewardFromConfig(section: Readonly<Record<string, unknown>>, deps: Omit<RewardDeps, "options"> = {}): ComposedReward {
  const options = (section.options ?? {}) as RewardOptions;
  const fns = Object.entries(section)
    .filter(([k, w]) => !SETTINGS.has(k) && w !== undefined)
    .map(([name, weight]) => {
      if (typeof weight !== "number") throw new ArborError(`reward.${name}: weight must be a number, got ${JSON.stringify(weight)}`, "config");
      return { fn: createRewardFn(name, { ...deps, options }), weight };
    });
  // Loading is asynchronous, so the caller loads `reward.custom` and passes the functions in.
  if (section.custom !== undefined && deps.custom === undefined) throw new ArborError("reward.custom: the custom reward functions were not loaded (loadCustomRewards)", "config");
  return composeRewards([...fns, ...(deps.custom ?? [])], { stepRewards: section.stepRewards === true });
}
