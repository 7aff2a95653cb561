// Global-norm gradient clipping (as torch.nn.utils.clip_grad_norm_): one norm over every parameter's
// gradient, and all gradients scaled by the same factor when it exceeds the limit, so the update keeps
// its direction.
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";

/** The global L2 norm of `grads` (float64 accumulation of per-tensor float32 sums of squares). */
export function globalNorm(grads: tf.NamedTensorMap): number {
  let sq = 0;
  for (const g of Object.values(grads)) sq += tf.tidy(() => tf.sum(tf.square(g)).dataSync()[0] as number);
  return Math.sqrt(sq);
}

/**
 * Scale `grads` so their global norm is at most `maxNorm` (Infinity = never). Returns the norm before
 * clipping and the gradients to apply (the inputs themselves when no scaling was needed; otherwise
 * new tensors, and the inputs are disposed). A non-finite norm is an ArborError: applying it would
 * destroy the weights.
 */
export function clipByGlobalNorm(grads: tf.NamedTensorMap, maxNorm: number): { norm: number; grads: tf.NamedTensorMap } {
  if (!(maxNorm > 0)) throw new ArborError(`trainer: maxGradNorm must be > 0, got ${maxNorm}`, "config");
  const norm = globalNorm(grads);
  if (!Number.isFinite(norm)) throw new ArborError(`trainer: gradient norm is ${norm}; the step was not applied`, "trainer");
  if (norm <= maxNorm) return { norm, grads };
  const scale = maxNorm / (norm + 1e-6);
  const out: tf.NamedTensorMap = {};
  for (const [name, g] of Object.entries(grads)) {
    out[name] = tf.mul(g, scale);
    g.dispose();
  }
  return { norm, grads: out };
}
