// Learning-rate schedules shared by SFT (`arbor sft --schedule`) and RL (`train.lrSchedule`): a pure function of
// the optimizer step, so a run's rates are known before it starts and tests can check them against hand values.

/** `constant`, or `cosine`: linear warm-up over the first steps, then cosine decay to a tenth of the peak. */
export type LrScheduleKind = "constant" | "cosine";

/**
 * The learning rate of optimizer step `step` (1-based) of `steps` under `schedule`: `lr` throughout for
 * `constant`; for `cosine`, `lr·step/warmupSteps` during warm-up, then `lr·(0.1 + 0.9·(1 + cos(π·t))/2)` with
 * `t` the fraction of the post-warm-up steps done (so the last step runs at `lr/10`).
 */
export function scheduledLr(lr: number, step: number, steps: number, schedule: LrScheduleKind = "constant", warmupSteps = 0): number {
  if (schedule === "constant") return lr;
  if (step <= warmupSteps) return (lr * step) / warmupSteps;
  const t = steps > warmupSteps ? Math.min(1, (step - warmupSteps) / (steps - warmupSteps)) : 1;
  return lr * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * t)));
}
