// Grouped-query attention as one differentiable op whose every matrix product runs on tfjs-wasm's fast
// (XNNPACK) path: per KV head, the query heads that share it are stacked along the rows, and each product —
// scores Q·Kᵀ, output P·V and, in the backward pass, dP = dO·Vᵀ, dQ = dS·K, dKᵀ = Qᵀ·dS, dVᵀ = dOᵀ·P — is an
// untransposed 2-D matMul, with only the small [rows, headDim] operands transposed. tf.matMul's own gradient
// and any batched product fall to the back-end's scalar loop, which made attention most of a step. The
// softmax backward is written out (dS = P ⊙ (dP − rowsum(dP ⊙ P))) so that only P is kept per head.
import * as tf from "@tensorflow/tfjs";

type GradArgs = (tf.Tensor | tf.GradSaveFunc)[];

/** Per-KV-head 2-D slices [group·r, hd] of q [r, nHead, hd] (llama.cpp maps query head h to KV head ⌊h / group⌋). */
function headsOf(q: tf.Tensor3D, nHeadKv: number): tf.Tensor2D[] {
  const [r, nHead, hd] = q.shape;
  return tf.unstack(tf.reshape(tf.transpose(q, [1, 0, 2]), [nHeadKv, (nHead / nHeadKv) * r, hd])) as tf.Tensor2D[];
}

/** Inverse of {@link headsOf}: per-KV-head [group·r, hd] blocks back to [r, nHead·hd]. */
function mergeHeads(parts: tf.Tensor2D[], r: number, nHead: number, hd: number): tf.Tensor2D {
  return tf.reshape(tf.transpose(tf.reshape(tf.stack(parts), [nHead, r, hd]), [1, 0, 2]), [r, nHead * hd]);
}

/**
 * Attention of queries q [r, nHead, hd] over keys and values [m, nHeadKv, hd] with the row-major r×m additive
 * mask `mask` (0 visible, MASKED hidden) and score scale `scale`; returns [r, nHead·hd]. The mask is an array,
 * not an input: nothing flows back to it.
 */
export function attention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, mask: Float32Array, scale: number): tf.Tensor2D {
  const [r, nHead, hd] = q.shape;
  const [m, nHeadKv] = k.shape;
  const group = nHead / nHeadKv;
  const op = tf.customGrad((...args: GradArgs) => {
    const [qi, ki, vi, save] = args as [tf.Tensor3D, tf.Tensor3D, tf.Tensor3D, tf.GradSaveFunc];
    const maskT = tf.tensor2d(mask, [r, m]);
    const qs = headsOf(tf.mul(qi, scale) as tf.Tensor3D, nHeadKv);
    const kT = tf.unstack(tf.transpose(ki, [1, 2, 0])) as tf.Tensor2D[]; // per KV head [hd, m]
    const vh = tf.unstack(tf.transpose(vi, [1, 0, 2])) as tf.Tensor2D[]; // per KV head [m, hd]
    const probs: tf.Tensor2D[] = [];
    const outs = qs.map((qh, h) => {
      const scores = tf.add(tf.reshape(tf.matMul(qh, kT[h] as tf.Tensor2D), [group, r, m]), maskT);
      const p = tf.reshape(tf.softmax(scores, -1), [group * r, m]) as tf.Tensor2D;
      probs.push(p);
      return tf.matMul(p, vh[h] as tf.Tensor2D) as tf.Tensor2D;
    });
    save([qi, ki, vi, ...probs]);
    return {
      value: mergeHeads(outs, r, nHead, hd),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [qsv, ksv, vsv, ...p] = saved as [tf.Tensor3D, tf.Tensor3D, tf.Tensor3D, ...tf.Tensor2D[]];
        const dO = headsOf(tf.reshape(dy, [r, nHead, hd]) as tf.Tensor3D, nHeadKv);
        const qh = headsOf(tf.mul(qsv, scale) as tf.Tensor3D, nHeadKv);
        const kh = tf.unstack(tf.transpose(ksv, [1, 0, 2])) as tf.Tensor2D[]; // [m, hd]
        const vT = tf.unstack(tf.transpose(vsv, [1, 2, 0])) as tf.Tensor2D[]; // [hd, m]
        const dq: tf.Tensor2D[] = [];
        const dkT: tf.Tensor2D[] = [];
        const dvT: tf.Tensor2D[] = [];
        dO.forEach((dOh, h) => {
          const ph = p[h] as tf.Tensor2D;
          const dP = tf.matMul(dOh, vT[h] as tf.Tensor2D);
          const dS = tf.mul(ph, tf.sub(dP, tf.sum(tf.mul(dP, ph), -1, true))) as tf.Tensor2D;
          dq.push(tf.mul(tf.matMul(dS, kh[h] as tf.Tensor2D), scale) as tf.Tensor2D);
          dkT.push(tf.matMul(tf.transpose(qh[h] as tf.Tensor2D), dS)); // scale is in qh
          dvT.push(tf.matMul(tf.transpose(dOh), ph));
        });
        // dKᵀ and dVᵀ are [nHeadKv, hd, m]: back to [m, nHeadKv, hd].
        return [tf.reshape(mergeHeads(dq, r, nHead, hd), [r, nHead, hd]), tf.transpose(tf.stack(dkT), [2, 0, 1]), tf.transpose(tf.stack(dvT), [2, 0, 1])];
      },
    };
  });
  return op(q, k, v) as tf.Tensor2D;
}
