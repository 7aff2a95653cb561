// The outcome reward: the environment's checker score for the final answer, and 0 for a program
// that did not complete (ran out of turns, crashed, timed out...), whatever its last text says.
import { ArborError } from "../core/errors.js";
import type { RewardContext, RewardFn } from "./reward-fn.js";

/** Create the `outcome` reward: `env.check(task, finalAnswer).score` for completed programs, else 0. */
export function createOutcomeReward(): RewardFn {
  return {
    name: "outcome",
    compute(ctx: RewardContext): number {
      const program = ctx.trajectory.program;
      if (program.termination?.kind !== "completed") return 0;
      const { score } = ctx.env.check(ctx.task, ctx.finalAnswer);
      if (typeof score !== "number" || !Number.isFinite(score)) {
        throw new ArborError(
          `outcome reward: env '${ctx.env.name}' returned score ${String(score)} for task '${ctx.task.id}' (program '${program.id}')`,
          "reward",
        );
      }
      return score;
    },
  };
}
