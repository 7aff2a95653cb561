// Top-K KL distillation loss for a draft model kept aligned with the policy (issue 17 item 6, Forge's idea):
// at each position the policy's next-token distribution is restricted to its K most likely tokens and
// renormalised (p̃), and the loss is KL(p̃ ‖ q) with q = softmax(draft logits), averaged over positions.
// Keeping only the top K makes the targets small to store (K ids and probabilities per position) and puts
// the draft's capacity where acceptance is decided: the tokens the policy is likely to emit.
//
// KL(p̃ ‖ q) = Σ_{i∈K} p̃_i (log p̃_i − log q_i); its gradient with respect to the draft logits z is q − p̃
// (p̃ is 0 outside K), divided by the number of positions for the mean. `topKKl` computes both in float64
// (the reference the tests check by hand and by finite differences); `topKKlLoss` is the same loss on tfjs
// tensors, differentiable, for the trainer.
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";

/** The policy's top-K distribution at each of `rows` positions (row-major, `k` entries per row). */
export interface TopKTargets {
  rows: number;
  k: number;
  /** Token ids, best first within a row. */
  ids: Int32Array;
  /** p̃: the policy's probabilities of those ids renormalised to sum to 1 per row. */
  probs: Float32Array;
}

function fail(message: string): never {
  throw new ArborError(`top-k KL: ${message}`, "trainer");
}

/**
 * The top-`k` renormalised distribution of each row of `logits` ([rows × nVocab], row-major). Ties keep the
 * lower token id first, so the targets are deterministic. Throws ArborError naming the argument when
 * `k` is not in 1..nVocab or the logits do not fill whole rows.
 */
export function topKTargets(logits: ArrayLike<number>, nVocab: number, k: number): TopKTargets {
  if (!Number.isInteger(nVocab) || nVocab < 1) fail(`nVocab must be a positive integer, got ${nVocab}`);
  if (!Number.isInteger(k) || k < 1 || k > nVocab) fail(`topK must be an integer in 1..${nVocab} (the vocabulary), got ${k}`);
  if (logits.length % nVocab !== 0) fail(`logits has ${logits.length} entries, not a whole number of rows of ${nVocab}`);
  const rows = logits.length / nVocab;
  const ids = new Int32Array(rows * k);
  const probs = new Float32Array(rows * k);
  const order = Array.from({ length: nVocab }, (_, i) => i);
  for (let r = 0; r < rows; r++) {
    const base = r * nVocab;
    const at = (i: number): number => logits[base + i] as number;
    order.sort((a, b) => at(b) - at(a) || a - b);
    const max = at(order[0] as number);
    if (!Number.isFinite(max)) fail(`row ${r} has a non-finite top logit (${max})`);
    let z = 0;
    for (let j = 0; j < k; j++) z += Math.exp(at(order[j] as number) - max);
    for (let j = 0; j < k; j++) {
      const id = order[j] as number;
      ids[r * k + j] = id;
      probs[r * k + j] = Math.exp(at(id) - max) / z;
    }
  }
  return { rows, k, ids, probs };
}

function checkTargets(t: TopKTargets, nVocab: number, rows: number): void {
  if (t.rows !== rows) fail(`targets have ${t.rows} rows for ${rows} rows of draft logits`);
  if (t.ids.length !== t.rows * t.k || t.probs.length !== t.rows * t.k) fail(`targets need rows × k = ${t.rows * t.k} ids and probs (got ${t.ids.length} and ${t.probs.length})`);
  for (let i = 0; i < t.ids.length; i++) {
    const id = t.ids[i] as number;
    if (id < 0 || id >= nVocab) fail(`target id ${id} at ${i} is outside the vocabulary (0..${nVocab - 1})`);
  }
}

/**
 * KL(p̃ ‖ softmax(z)) averaged over rows, and its gradient with respect to the draft logits z
 * ([rows × nVocab], row-major), in float64. 0 rows give loss 0.
 */
export function topKKl(draftLogits: ArrayLike<number>, nVocab: number, targets: TopKTargets): { loss: number; grad: Float64Array } {
  if (draftLogits.length % nVocab !== 0) fail(`draft logits have ${draftLogits.length} entries, not a whole number of rows of ${nVocab}`);
  const rows = draftLogits.length / nVocab;
  checkTargets(targets, nVocab, rows);
  const grad = new Float64Array(draftLogits.length);
  if (rows === 0) return { loss: 0, grad };
  let loss = 0;
  for (let r = 0; r < rows; r++) {
    const base = r * nVocab;
    let max = -Infinity;
    for (let i = 0; i < nVocab; i++) max = Math.max(max, draftLogits[base + i] as number);
    let z = 0;
    for (let i = 0; i < nVocab; i++) z += Math.exp((draftLogits[base + i] as number) - max);
    const logZ = max + Math.log(z);
    for (let i = 0; i < nVocab; i++) grad[base + i] = Math.exp((draftLogits[base + i] as number) - logZ) / rows;
    for (let j = 0; j < targets.k; j++) {
      const p = targets.probs[r * targets.k + j] as number;
      const id = targets.ids[r * targets.k + j] as number;
      if (p > 0) loss += p * (Math.log(p) - ((draftLogits[base + id] as number) - logZ));
      grad[base + id] = (grad[base + id] as number) - p / rows;
    }
  }
  return { loss: loss / rows, grad };
}

/** The dense [rows × nVocab] matrix of p̃ (0 outside each row's top K). */
function denseTargets(t: TopKTargets, nVocab: number): Float32Array {
  const dense = new Float32Array(t.rows * nVocab);
  for (let r = 0; r < t.rows; r++) {
    for (let j = 0; j < t.k; j++) {
      const at = r * nVocab + (t.ids[r * t.k + j] as number);
      dense[at] = (dense[at] as number) + (t.probs[r * t.k + j] as number);
    }
  }
  return dense;
}

/**
 * `topKKl`'s loss on tfjs: differentiable in `draftLogits` ([rows, nVocab]), its gradient q − p̃ per row
 * over rows. Builds tensors: call inside tf.tidy or a gradient function.
 */
export function topKKlLoss(draftLogits: tf.Tensor2D, targets: TopKTargets): tf.Scalar {
  const [rows, nVocab] = draftLogits.shape;
  checkTargets(targets, nVocab, rows);
  if (rows === 0) return tf.scalar(0);
  let entropyTerm = 0;
  for (let i = 0; i < targets.probs.length; i++) {
    const p = targets.probs[i] as number;
    if (p > 0) entropyTerm += p * Math.log(p);
  }
  const p = tf.tensor2d(denseTargets(targets, nVocab), [rows, nVocab]);
  const cross = tf.neg(tf.sum(tf.mul(p, tf.logSoftmax(draftLogits, -1))));
  return tf.div(tf.add(cross, entropyTerm), rows) as tf.Scalar;
}
