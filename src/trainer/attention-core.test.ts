import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { attention } from "./attention-core.js";
import { MASKED } from "./attention-mask.js";
import { tfWasm } from "./tf-runtime.js";

beforeAll(async () => {
  await tfWasm();
});

/** The textbook form on tf's own ops and autodiff (batched products, tf.softmax's gradient): the reference. */
function reference(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, mask: Float32Array, scale: number): tf.Tensor2D {
  const [r, nHead, hd] = q.shape;
  const [m, nHeadKv] = k.shape;
  const group = nHead / nHeadKv;
  // Repeat each KV head for the query heads that share it (head h reads KV head ⌊h / group⌋).
  const rep = (x: tf.Tensor3D) => tf.reshape(tf.tile(tf.expandDims(tf.transpose(x, [1, 0, 2]), 1), [1, group, 1, 1]), [nHead, m, hd]);
  const scores = tf.add(tf.mul(tf.matMul(tf.transpose(q, [1, 0, 2]), rep(k), false, true), scale), tf.tensor2d(mask, [r, m]));
  return tf.reshape(tf.transpose(tf.matMul(tf.softmax(scores, -1), rep(v)), [1, 0, 2]), [r, nHead * hd]);
}

function randomTensor(rng: Rng, shape: number[]): tf.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return tf.tensor(Float32Array.from({ length: n }, () => rng.normal()), shape);
}

function maxRel(a: Float32Array, b: Float32Array): number {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs((a[i] as number) - (b[i] as number)));
    scale = Math.max(scale, Math.abs(b[i] as number));
  }
  return diff / scale;
}

describe("attention (fast-path grouped-query attention)", () => {
  it("gives the reference's output and gradients for q, k and v (GQA, masked keys, more keys than queries)", () => {
    const rng = new Rng(3);
    for (const [nHead, nHeadKv] of [[4, 2], [4, 4], [2, 1]] as const) {
      const r = 5;
      const m = 9;
      const hd = 8;
      const q = randomTensor(rng, [r, nHead, hd]) as tf.Tensor3D;
      const k = randomTensor(rng, [m, nHeadKv, hd]) as tf.Tensor3D;
      const v = randomTensor(rng, [m, nHeadKv, hd]) as tf.Tensor3D;
      // Keys 0..3 are ancestors (visible), 4..8 the queries' own chain (causal), as a tree segment's mask.
      const mask = new Float32Array(r * m);
      for (let i = 0; i < r; i++) mask.fill(MASKED, i * m + 4 + i + 1, (i + 1) * m);
      // Key 3 is hidden from every query.
      for (let i = 0; i < r; i++) mask[i * m + 3] = MASKED;
      const w = randomTensor(rng, [r, nHead * hd]);
      const loss = (f: typeof attention) => (a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(f(a as tf.Tensor3D, b as tf.Tensor3D, c as tf.Tensor3D, mask, 0.35), w));
      const fast = tf.grads(loss(attention))([q, k, v]);
      const ref = tf.grads(loss(reference))([q, k, v]);
      expect(maxRel(attention(q, k, v, mask, 0.35).dataSync() as Float32Array, reference(q, k, v, mask, 0.35).dataSync() as Float32Array)).toBeLessThan(1e-6);
      fast.forEach((g, i) => expect(maxRel(g.dataSync() as Float32Array, ref[i]!.dataSync() as Float32Array), `gradient ${"qkv"[i]} (${nHead}/${nHeadKv} heads)`).toBeLessThan(1e-5));
      // A key no query sees gets exactly nothing back; one only the last query sees still gets its share.
      for (const g of [fast[1]!, fast[2]!]) {
        const rows = g.arraySync() as number[][][];
        expect(rows[3]!.flat().every((x) => x === 0)).toBe(true);
        expect(rows[8]!.flat().some((x) => x !== 0)).toBe(true);
      }
      tf.dispose([q, k, v, w, ...fast, ...ref]);
    }
  });
});
