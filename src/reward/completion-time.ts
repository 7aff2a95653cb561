// The completion-time reward (Forge, TECHNIQUES §E): how much faster than its group a program
// finished, in wall time from its start to its end — model calls, tool runs and sandbox work all
// count, so parallel tool use and short paths are rewarded. Only programs that solved the task
// compete: a program that failed fast must not earn a speed bonus.
//
// With T_i the program's wall time and T̄ the mean over the group's successful programs, the value
// is clamp(1 − T_i/T̄, −1, 1). Per call p (spanning from its start to the next call's start, the
// first from the program's start, the last to its end, so Σ τ_p = T_i) the share is 1/K − τ_p/T̄.
import { ArborError } from "../core/errors.js";
import { callsInOrder, rescaleSteps } from "./call-steps.js";
import type { RewardContext, StepwiseRewardFn, StepwiseValue } from "./reward-fn.js";

export interface CompletionTimeOptions {
  /** A program competes when it completed with a checker score at least this (default 1). */
  minOutcome?: number;
}

/** Wall time of a program from its start to its end, ms. */
export function wallTimeMs(ctx: RewardContext): number {
  const p = ctx.trajectory.program;
  if (p.endedAt === undefined) throw new ArborError(`reward.completion-time: program '${p.id}' has not ended`, "reward");
  return Math.max(0, p.endedAt - p.createdAt);
}

/** Create the `completion-time` reward (needs the group: use `computeGroup`). */
export function createCompletionTimeReward(opts: CompletionTimeOptions = {}): StepwiseRewardFn {
  const minOutcome = opts.minOutcome ?? 1;
  if (!Number.isFinite(minOutcome)) throw new ArborError(`reward.completion-time: minOutcome must be a finite number, got ${minOutcome}`, "config");
  const competes = (c: RewardContext): boolean => c.trajectory.program.termination?.kind === "completed" && (c.check?.score ?? -Infinity) >= minOutcome;
  return {
    name: "completion-time",
    needsGroup: true,
    compute(ctx: RewardContext): StepwiseValue {
      if (!ctx.group) {
        throw new ArborError(`reward.completion-time: program '${ctx.trajectory.program.id}' has no group; it is relative to the group (use computeGroup)`, "reward");
      }
      const calls = callsInOrder(ctx.trajectory);
      const zero = { value: 0, steps: calls.map(() => 0) };
      const rivals = ctx.group.filter(competes);
      if (!competes(ctx) || rivals.length < 2) return zero;
      const mean = rivals.reduce((a, c) => a + wallTimeMs(c), 0) / rivals.length;
      if (mean <= 0) return zero;
      const total = wallTimeMs(ctx);
      const raw = 1 - total / mean;
      const value = Math.min(1, Math.max(-1, raw));
      if (calls.length === 0) return { value, steps: [] };
      const { createdAt, endedAt } = ctx.trajectory.program as { createdAt: number; endedAt: number };
      // Call boundaries from the gateway's clock, kept inside the program's own span and in order.
      const bounds = [createdAt];
      for (const c of calls.slice(1)) bounds.push(Math.min(endedAt, Math.max(bounds[bounds.length - 1] as number, c.timings.start)));
      bounds.push(Math.max(endedAt, bounds[bounds.length - 1] as number));
      const steps = calls.map((_, p) => 1 / calls.length - ((bounds[p + 1] as number) - (bounds[p] as number)) / mean);
      return { value, steps: rescaleSteps(steps, steps.reduce((a, b) => a + b, 0), value) };
    },
  };
}
