// Matrix products the trainer runs on tfjs-wasm's fast path. That back-end hands a matMul to XNNPACK only when
// neither operand is transposed and the batch is 1; every other form (x·Wᵀ of a linear layer, the transposed
// products of every gradient, batched attention) runs in a scalar triple loop about an order of magnitude
// slower. These ops arrange their operands — forward and backward — so that every product takes the fast
// path, transposing only the small operand (a weight, or a [rows, 2] pair) where one is needed.
import * as tf from "@tensorflow/tfjs";

type GradArgs = (tf.Tensor | tf.GradSaveFunc)[];

const linearOp = tf.customGrad((...args: GradArgs) => {
  const [x, w, save] = args as [tf.Tensor2D, tf.Tensor2D, tf.GradSaveFunc];
  save([x, w]);
  return {
    // y = x·wᵀ with wᵀ materialised (a weight: small), so the product is untransposed.
    value: tf.matMul(x, tf.transpose(w)),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const [xs, ws] = saved as [tf.Tensor2D, tf.Tensor2D];
      // dx = dy·w (untransposed as stored); dw = dyᵀ·x (dy [rows, out] transposed once).
      return [tf.matMul(dy as tf.Tensor2D, ws), tf.matMul(tf.transpose(dy as tf.Tensor2D), xs)];
    },
  };
});

/** `x · wᵀ` for x [rows, in] and a weight w [out, in] (GGUF's layout), on the fast path in both passes. */
export function linear(x: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor2D {
  return linearOp(x, w) as tf.Tensor2D;
}

let swap: tf.Tensor2D | undefined;
/** [[0, 1], [1, 0]], kept for the process: the pair swap is its own transpose and inverse. */
function swapMatrix(): tf.Tensor2D {
  swap ??= tf.keep(tf.tensor2d([0, 1, 1, 0], [2, 2]));
  return swap;
}

const swapPairsOp = tf.customGrad((...args: GradArgs) => {
  const [x] = args as [tf.Tensor];
  const shape = x.shape;
  // A product with a permutation matrix is exact: each output is one input times 1 plus zeros.
  return {
    value: tf.reshape(tf.matMul(tf.reshape(x, [-1, 2]), swapMatrix()), shape),
    gradFunc: (dy: tf.Tensor) => tf.reshape(tf.matMul(tf.reshape(dy, [-1, 2]), swapMatrix()), shape),
  };
});

/** Swap the two entries of every adjacent pair of the last axis (size 2): RoPE's rotation partner. */
export function swapPairs<T extends tf.Tensor>(x: T): T {
  return swapPairsOp(x) as T;
}
