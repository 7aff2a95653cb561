// Differentiable helpers the wasm back-end lacks: it has no UnsortedSegmentSum kernel, which is what
// tfjs's own gradient of `gather` uses, so row gathers get their gradient from ScatterNd (which sums
// duplicate indices) instead; and a stop-gradient for CISPO's clipped importance weight.
import * as tf from "@tensorflow/tfjs";

type GradArgs = (tf.Tensor | tf.GradSaveFunc)[];

const gatherRowsOp = tf.customGrad((...args: GradArgs) => {
  const [input, indices, save] = args as [tf.Tensor, tf.Tensor1D, tf.GradSaveFunc];
  // The indices go in as an input and are saved: a tensor merely closed over is disposed when the
  // forward scope ends, before the backward pass needs it.
  save([indices]);
  const shape = input.shape;
  return {
    value: tf.gather(input, indices, 0),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const kept = saved[0] as tf.Tensor1D;
      return [tf.scatterND(tf.expandDims(kept, 1), dy, shape), tf.zerosLike(kept)];
    },
  };
});

const stopGradientOp = tf.customGrad((...args: GradArgs) => {
  const input = args[0] as tf.Tensor;
  return { value: tf.clone(input), gradFunc: (dy: tf.Tensor) => tf.zerosLike(dy) };
});

/** `x[idx]` along axis 0, differentiable on the wasm back-end (duplicate indices accumulate). */
export function gatherRows<T extends tf.Tensor>(x: T, idx: tf.Tensor1D): T {
  return gatherRowsOp(x, idx) as T;
}

/** The value of `x` with no gradient flowing back through it (sg(·) in the loss formulas). */
export function stopGradient<T extends tf.Tensor>(x: T): T {
  return stopGradientOp(x) as T;
}
