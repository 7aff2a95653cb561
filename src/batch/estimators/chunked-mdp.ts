// ROLL's Chunked MDP: a chunk is the model tokens between two environment interactions (one call's output).
// Chunk k of K gets the return G_k = γ^{K−1−k}·R (the final reward, discounted by the chunks still to come);
// its advantage subtracts the group's mean final reward. The ratio is the chunk's geometric mean, and chunks
// whose trainer/engine mismatch exceeds H are masked out.
import { ArborError } from "../../core/errors.js";
import { makeEstimator, mean, type Estimator } from "./estimator.js";
import { validateLossSpec } from "./loss-spec.js";

/** Options of {@link createChunkedMdp}. */
export interface ChunkedMdpOptions {
  /** c of dual-clip PPO (LossSpec.clipRatioC; default 3 as verl's clip_ratio_c). */
  clipRatioC?: number;
  gamma?: number;
  epsLow?: number;
  epsHigh?: number;
  /** H of the mismatch mask (Arbor's default; the source leaves it to configuration). */
  mismatchThreshold?: number;
}

/** The chunked-MDP estimator: A_{i,k} = γ^{K_i−1−k}·R_i − mean_g(R). */
export function createChunkedMdp(opts: ChunkedMdpOptions = {}): Estimator {
  const gamma = opts.gamma ?? 0.95;
  if (!(gamma > 0 && gamma <= 1)) throw new ArborError(`chunked-mdp: gamma must be in (0, 1], got ${gamma}`, "batch");
  return makeEstimator({
    name: "chunked-mdp",
    loss: validateLossSpec({
      ratio: "chunk",
      objective: "clip",
      epsLow: opts.epsLow ?? 0.2,
      epsHigh: opts.epsHigh ?? 0.2,
      normaliser: "unit-mean",
      mismatchThreshold: opts.mismatchThreshold ?? 2,
      clipRatioC: opts.clipRatioC ?? 3,
    }),
    advantages: (programs) => {
      const baseline = mean(programs.map((p) => p.reward));
      return programs.map((p) => Array.from({ length: p.chunkCount }, (_, k) => gamma ** (p.chunkCount - 1 - k) * p.reward - baseline));
    },
  });
}
