// The policy-gradient losses of src/batch/estimators/loss-spec.ts (GRPO/PPO-clip, Dr.GRPO, DAPO, GSPO,
// CISPO, chunked MDP — all one LossSpec) on tfjs tensors, plus SFT cross-entropy. The formula is the one
// `referenceLoss` computes in float64; the trainer's tests pin the two together. Sequence/chunk ratios
// average log-ratios per unit with a dense [units × terms] matmul (the wasm back-end has no segment-sum
// kernel; a matmul against 0/1/|u| entries is exact for the zeros and differentiable).
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";
import { validateLossSpec, type LossSpec } from "../batch/estimators/loss-spec.js";
import { gatherRows, stopGradient } from "./tf-ops.js";

/** Per-term constants of a policy loss (all `terms` long). */
export interface PolicyTerms {
  oldLogprob: ArrayLike<number>;
  advantage: ArrayLike<number>;
  weight: ArrayLike<number>;
  /** Ratio unit of each term (ignored for ratio "token"). */
  unit: ArrayLike<number>;
  /** The trainer's pre-update logprobs for the mismatch mask; absent = the current logprobs' values. */
  trainerOldLogprob?: ArrayLike<number>;
}

/** Largest units × terms averaging matrix the sequence/chunk ratio may build (64 MiB of float32). */
export const MAX_UNIT_MATRIX = 16 * 1024 * 1024;

function fail(message: string): never {
  throw new ArborError(`trainer loss: ${message}`, "trainer");
}

/** Dense unit ids 0..U−1 in order of first appearance, and each unit's term count. */
function denseUnits(spec: LossSpec, n: number, unit: ArrayLike<number>): { ids: Int32Array; counts: number[] } {
  const ids = new Int32Array(n);
  const counts: number[] = [];
  const map = new Map<number, number>();
  for (let t = 0; t < n; t++) {
    const key = spec.ratio === "token" ? t : (unit[t] as number);
    let id = map.get(key);
    if (id === undefined) {
      id = counts.length;
      map.set(key, id);
      counts.push(0);
    }
    ids[t] = id;
    counts[id] = (counts[id] as number) + 1;
  }
  return { ids, counts };
}

/**
 * The scalar loss of `spec` for term logprobs `logprob` (differentiable) and the batch's per-term
 * constants. Throws ArborError naming the field when lengths disagree or the spec is invalid.
 */
export function policyLoss(spec: LossSpec, logprob: tf.Tensor1D, terms: PolicyTerms): tf.Scalar {
  validateLossSpec(spec);
  const n = logprob.shape[0];
  for (const f of ["oldLogprob", "advantage", "weight", "unit"] as const) {
    if (terms[f].length !== n) fail(`${f} has ${terms[f].length} entries for ${n} terms`);
  }
  if (n === 0) return tf.scalar(0);
  const { ids, counts } = denseUnits(spec, n, terms.unit);
  const old = tf.tensor1d(Float32Array.from(terms.oldLogprob));
  const adv = tf.tensor1d(Float32Array.from(terms.advantage));
  const d: tf.Tensor1D = tf.sub(logprob, old);

  let logRho: tf.Tensor1D = d;
  if (spec.ratio !== "token") {
    const nUnits = counts.length;
    if (nUnits * n > MAX_UNIT_MATRIX) fail(`${nUnits} ratio units × ${n} terms exceeds the averaging-matrix limit of ${MAX_UNIT_MATRIX} entries; split the batch`);
    const avg = new Float32Array(nUnits * n);
    for (let t = 0; t < n; t++) avg[(ids[t] as number) * n + t] = 1 / (counts[ids[t] as number] as number);
    const perUnit = tf.reshape(tf.matMul(tf.tensor2d(avg, [nUnits, n]), tf.reshape(d, [n, 1])), [nUnits]);
    logRho = gatherRows(perUnit as tf.Tensor1D, tf.tensor1d(ids, "int32"));
  }

  // The mismatch mask depends on values only (it selects terms, it is not differentiated).
  const keep = new Float32Array(n).fill(1);
  if (spec.mismatchThreshold !== undefined) {
    const trainerOld = terms.trainerOldLogprob ?? (logprob.dataSync() as Float32Array);
    if (trainerOld.length !== n) fail(`trainerOldLogprob has ${trainerOld.length} entries for ${n} terms`);
    const sums = new Float64Array(counts.length);
    for (let t = 0; t < n; t++) {
      const u = ids[t] as number;
      sums[u] = (sums[u] as number) + (trainerOld[t] as number) - (terms.oldLogprob[t] as number);
    }
    for (let t = 0; t < n; t++) {
      const u = ids[t] as number;
      if (Math.exp((sums[u] as number) / (counts[u] as number)) > spec.mismatchThreshold) keep[t] = 0;
    }
  }
  const weight = tf.tensor1d(Float32Array.from(terms.weight, (w, t) => w * (keep[t] as number)));

  const rho = tf.exp(logRho);
  const clipped = tf.clipByValue(rho, 1 - spec.epsLow, 1 + spec.epsHigh);
  let f =
    spec.objective === "clip"
      ? tf.minimum(tf.mul(rho, adv), tf.mul(clipped, adv))
      : tf.mul(tf.mul(stopGradient(clipped), adv), logprob);
  if (spec.clipRatioC !== undefined) {
    // Dual clip (loss-spec.ts): where A < 0, f = max(f, c·A); elsewhere f. The bound is a constant, so a
    // bounded term has zero gradient, as in verl's torch.where(A < 0, min(−c·A, −f), −f).
    const c = spec.clipRatioC;
    const negative = tf.tensor1d(Float32Array.from(terms.advantage, (a) => (a < 0 ? 1 : 0)), "bool");
    f = tf.where(negative, tf.maximum(f, tf.mul(adv, c)), f);
  }
  return tf.neg(tf.sum(tf.mul(weight, f))) as tf.Scalar;
}

/** Supervised cross-entropy: −Σ weight_t · log π(target_t) (weights carry the normaliser). */
export function sftLoss(logprob: tf.Tensor1D, weight: ArrayLike<number>): tf.Scalar {
  const n = logprob.shape[0];
  if (weight.length !== n) fail(`weight has ${weight.length} entries for ${n} terms`);
  if (n === 0) return tf.scalar(0);
  return tf.neg(tf.sum(tf.mul(tf.tensor1d(Float32Array.from(weight)), logprob))) as tf.Scalar;
}
