// CISPO (MiniMax-M1, used by Forge): clip the importance-sampling weight, not the update — every token keeps
// a gradient through log π_θ, weighted by sg(clip(r, 0, 1 + ε_high)); token-level normaliser.
import { grpoAdvantages } from "../grpo.js";
import { broadcast, makeEstimator, type Estimator } from "./estimator.js";
import { validateLossSpec } from "./loss-spec.js";

/** Options of {@link createCispo}. */
export interface CispoOptions {
  /** Upper clip of the IS weight (the source gives no number; Arbor defaults to DAPO's 0.28). */
  epsHigh?: number;
  eps?: number;
}

/** The CISPO estimator (GRPO advantages; the IS weight's lower bound is 0, i.e. ε_low = 1). */
export function createCispo(opts: CispoOptions = {}): Estimator {
  return makeEstimator({
    name: "cispo",
    loss: validateLossSpec({ ratio: "token", objective: "cispo", epsLow: 1, epsHigh: opts.epsHigh ?? 0.28, normaliser: "token-mean" }),
    advantages: (programs) => broadcast(programs, grpoAdvantages(programs.map((p) => p.reward), opts.eps ?? 1e-6)),
  });
}
