// The RewardFn interface: one named scalar signal computed from a finished program's trajectory,
// its task and environment, and the program's final answer.
import type { Trajectory } from "../core/types.js";
import type { Environment, Task } from "../envs/env.js";

/** Everything a reward function may look at. */
export interface RewardContext {
  trajectory: Trajectory;
  task: Task;
  env: Environment;
  /** Text of the final assistant message (see `finalAnswer`). */
  finalAnswer: string;
}

/** A named reward component. `compute` is pure and synchronous. */
export interface RewardFn {
  name: string;
  compute(ctx: RewardContext): number;
}
