// The RewardFn interface: one named scalar signal computed from a finished program's trajectory,
// its task and environment, and the program's final answer.
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
}

/** A named reward component. `compute` is pure and synchronous. */
export interface RewardFn {
  name: string;
  compute(ctx: RewardContext): number;
}
