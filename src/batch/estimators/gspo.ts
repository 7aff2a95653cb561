// GSPO (Qwen): the importance ratio is the sequence's geometric mean s_i = exp(mean_t log r_{i,t}), clipped at
// 1 − 3e-4 / 1 + 4e-4, and each sequence counts once.
import { grpoAdvantages } from "../grpo.js";
import { broadcast, makeEstimator, type Estimator } from "./estimator.js";
import { validateLossSpec } from "./loss-spec.js";

/** Options of {@link createGspo}. */
export interface GspoOptions {
  epsLow?: number;
  epsHigh?: number;
  eps?: number;
}

/** The GSPO estimator (GRPO advantages, sequence-level ratio and clipping). */
export function createGspo(opts: GspoOptions = {}): Estimator {
  return makeEstimator({
    name: "gspo",
    loss: validateLossSpec({ ratio: "sequence", objective: "clip", epsLow: opts.epsLow ?? 3e-4, epsHigh: opts.epsHigh ?? 4e-4, normaliser: "sample-mean" }),
    advantages: (programs) => broadcast(programs, grpoAdvantages(programs.map((p) => p.reward), opts.eps ?? 1e-6)),
  });
}
