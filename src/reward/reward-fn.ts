// The RewardFn interface: one named scalar signal computed from a finished program's trajectory,
// its task and environment, and the program's final answer — optionally split over the program's
// calls (steps), and for some signals relative to the program's group or computed asynchronously.
import type { Trajectory } from "../core/types.js";
import type { CheckResult, Environment, Task } from "../envs/env.js";

/** Everything a reward function may look at. */
export interface RewardContext {
  trajectory: Trajectory;
  task: Task;
  env: Environment;
  /** Text of the final assistant message (see `finalAnswer`). */
  finalAnswer: string;
  /**
   * The environment's check of this program (`env.check` is async and may need the live sandbox,
   * so the rollout runs it before teardown); absent when the program did not complete.
   */
  check?: CheckResult;
  /**
   * Every program of this program's group (itself included), for rewards relative to the group
   * (completion time). Set by `ComposedReward.computeGroup`; absent on the per-program path.
   */
  group?: readonly RewardContext[];
}

/**
 * A reward value split over the program's calls: `steps[i]` is the share of the call at position
 * i of the calls sorted by index; the steps sum to `value`. Used for reward-to-go (TECHNIQUES §E).
 */
export interface StepwiseValue {
  value: number;
  steps: number[];
}

/** What `compute` may return: a plain value (credited to the last call) or a per-call split. */
export type RewardValue = number | StepwiseValue;

/** A named reward component. */
export interface RewardFn {
  /** kebab-case; the component's name in the stored reward. */
  readonly name: string;
  /** True when the value is relative to the group: `compute` needs `ctx.group`. */
  readonly needsGroup?: boolean;
  /** True when `compute` returns a promise (e.g. it asks a judge model). Otherwise it never does. */
  readonly isAsync?: boolean;
  compute(ctx: RewardContext): RewardValue | Promise<RewardValue>;
}

/** A synchronous reward function that always splits its value over the calls. */
export type StepwiseRewardFn = Omit<RewardFn, "compute"> & { compute(ctx: RewardContext): StepwiseValue };
