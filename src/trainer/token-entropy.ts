// The policy's token entropy from the trainer's own logits: H = −Σ_v π(v) log π(v) over the vocabulary at
// each loss term's row. It is read off the logits the step already computes (not estimated from sampled
// tokens' logprobs, which only give −log π(sampled) and are biased by the sampler's temperature and top-p),
// and it is a metric only: nothing differentiates it, so it does not touch the step's gradient.
import * as tf from "@tensorflow/tfjs";

/**
 * Entropy in nats of each row's softmax ([rows, vocab] logits → [rows]). Computed from log-softmax as
 * −Σ exp(l) · l, which is finite where a probability underflows to 0 (0 · −∞ never occurs: l is finite).
 */
export function tokenEntropy(logits: tf.Tensor2D): tf.Tensor1D {
  return entropyOfLogSoftmax(tf.logSoftmax(logits, -1));
}

/**
 * {@link tokenEntropy} from rows' log-softmax, for a caller that has it already (the trainer's term logprobs):
 * two [rows, vocab] tensors (exp, product) instead of three, which micro-batches.ts counts in a step's tape.
 */
export function entropyOfLogSoftmax(lsm: tf.Tensor2D): tf.Tensor1D {
  // No tidy here: callers run it inside the step's gradient scope or their own tidy, which free the intermediates.
  return tf.neg(tf.sum(tf.mul(tf.exp(lsm), lsm), -1)) as tf.Tensor1D;
}

/** The mean of per-term entropies (the batch's mean token entropy); NaN for no terms. */
export function meanEntropy(entropy: ArrayLike<number>): number {
  if (entropy.length === 0) return NaN;
  let s = 0;
  for (let i = 0; i < entropy.length; i++) s += entropy[i] as number;
  return s / entropy.length;
}
