// Dr.GRPO ("GRPO done right"): no division by the group's std (no difficulty bias) and a constant loss
// normaliser instead of 1/|o_i| (no length bias).
import { broadcast, makeEstimator, mean, type Estimator } from "./estimator.js";
import { validateLossSpec } from "./loss-spec.js";

/** Options of {@link createDrGrpo}. */
export interface DrGrpoOptions {
  /** c of dual-clip PPO (LossSpec.clipRatioC; default 3 as verl's clip_ratio_c). */
  clipRatioC?: number;
  clip?: number;
  /** The constant normaliser: the generation budget in tokens. */
  maxTokens?: number;
}

/** The Dr.GRPO estimator: Â_i = r_i − mean_g; weight 1/(N · maxTokens). */
export function createDrGrpo(opts: DrGrpoOptions = {}): Estimator {
  const clip = opts.clip ?? 0.2;
  return makeEstimator({
    name: "dr-grpo",
    loss: validateLossSpec({ ratio: "token", objective: "clip", epsLow: clip, epsHigh: clip, normaliser: "constant", normaliserConstant: opts.maxTokens ?? 1024, clipRatioC: opts.clipRatioC ?? 3 }),
    advantages: (programs) => {
      const m = mean(programs.map((p) => p.reward));
      return broadcast(programs, programs.map((p) => p.reward - m));
    },
  });
}
