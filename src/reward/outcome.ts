// The outcome reward: the environment's checker score for the final answer, and 0 for a program
// that did not complete (ran out of turns, crashed, timed out...), whatever its last text says.
import { ArborError } from "../core/errors.js";
import type { RewardContext, RewardFn } from "./reward-fn.js";

/** Create the `outcome` reward: the checker's score (`ctx.check`) for completed programs, else 0. */
export function createOutcomeReward(): RewardFn {
  return {
    name: "outcome",
    compute(ctx: RewardContext): number {
      const program = ctx.trajectory.program;
      if (program.termination?.kind !== "completed") return 0;
      if (!ctx.check) {
        throw new ArborError(
          `outcome reward: no checker result for completed program '${program.id}' (the rollout must run env.check and pass it as ctx.check)`,
          "reward",
        );
      }
      const { score } = ctx.check;
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
