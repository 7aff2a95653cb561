// DAPO: clip-higher (ε_low 0.2, ε_high 0.28), token-level normaliser, dynamic sampling (groups whose rewards
// are all equal carry no signal and are dropped, and reported), and overlong reward shaping.
import { ArborError } from "../../core/errors.js";
import { grpoAdvantages } from "../grpo.js";
import { broadcast, makeEstimator, type Estimator } from "./estimator.js";
import { validateLossSpec } from "./loss-spec.js";

/** Options of {@link createDapo}. */
export interface DapoOptions {
  /** c of dual-clip PPO (LossSpec.clipRatioC; default 3 as verl's clip_ratio_c). */
  clipRatioC?: number;
  epsLow?: number;
  epsHigh?: number;
  /** L_max: the generation budget of one call, in tokens. */
  maxTokens?: number;
  /** L_cache: the soft-penalty window below L_max; 0 disables overlong shaping. */
  overlongCache?: number;
  eps?: number;
}

/**
 * DAPO's soft overlong punishment for an output of `length` tokens: 0 up to L_max − L_cache, then falling
 * linearly to −1 at L_max, and −1 beyond.
 */
export function overlongPenalty(length: number, maxTokens: number, cache: number): number {
  if (cache <= 0) return 0;
  if (length <= maxTokens - cache) return 0;
  if (length <= maxTokens) return (maxTokens - cache - length) / cache;
  return -1;
}

/** The DAPO estimator. The shaped reward uses the program's longest call (each call has its own budget). */
export function createDapo(opts: DapoOptions = {}): Estimator {
  const maxTokens = opts.maxTokens ?? 1024;
  const cache = opts.overlongCache ?? 256;
  if (!(cache >= 0 && cache <= maxTokens)) throw new ArborError(`dapo: overlongCache must be in [0, maxTokens], got ${cache}`, "batch");
  return makeEstimator({
    name: "dapo",
    loss: validateLossSpec({ ratio: "token", objective: "clip", epsLow: opts.epsLow ?? 0.2, epsHigh: opts.epsHigh ?? 0.28, normaliser: "token-mean", clipRatioC: opts.clipRatioC ?? 3 }),
    dropUniformGroups: true,
    advantages: (programs) => {
      const shaped = programs.map((p) => p.reward + overlongPenalty(Math.max(0, ...p.chunkLengths), maxTokens, cache));
      return broadcast(programs, grpoAdvantages(shaped, opts.eps ?? 1e-6));
    },
  });
}
