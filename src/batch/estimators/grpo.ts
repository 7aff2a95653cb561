// GRPO (DeepSeekMath): group-normalised rollout advantage broadcast to every call, token ratio clipped at
// 1 ± 0.2 with verl's dual clip at c = 3 for negative advantages, each sample's token mean then the mean
// over samples. A group of one gets advantage 0 (see src/batch/grpo.ts for why Arbor differs from verl).
import { grpoAdvantages } from "../grpo.js";
import { broadcast, makeEstimator, type Estimator } from "./estimator.js";
import { validateLossSpec } from "./loss-spec.js";

/** Options of {@link createGrpo}. */
export interface GrpoOptions {
  /** c of dual-clip PPO (LossSpec.clipRatioC; default 3 as verl's clip_ratio_c). */
  clipRatioC?: number;
  eps?: number;
  clip?: number;
}

/** The GRPO estimator: Â_i = (r_i − mean_g)/(std_g + eps). */
export function createGrpo(opts: GrpoOptions = {}): Estimator {
  const eps = opts.eps ?? 1e-6;
  const clip = opts.clip ?? 0.2;
  return makeEstimator({
    name: "grpo",
    loss: validateLossSpec({ ratio: "token", objective: "clip", epsLow: clip, epsHigh: clip, normaliser: "sample-mean", clipRatioC: opts.clipRatioC ?? 3 }),
    advantages: (programs) => broadcast(programs, grpoAdvantages(programs.map((p) => p.reward), eps)),
  });
}
