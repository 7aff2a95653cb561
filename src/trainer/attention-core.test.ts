import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { attention, treeAttention } from "./attention-core.js";
import { MASKED, treeMask, treeSegments } from "./attention-mask.js";
import { gatherRows } from "./tf-ops.js";
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

/** A pre-order tree of n nodes with forks at several depths (several chains, shared ancestors). */
function branchyParents(rng: Rng, n: number): Int32Array {
  const parents = new Int32Array(n);
  parents[0] = -1;
  // Mostly continue the previous node; sometimes fork from an earlier node so chains share ancestors.
  for (let i = 1; i < n; i++) parents[i] = rng.float() < 0.7 ? i - 1 : Math.floor(rng.float() * i);
  return parents;
}

describe("treeAttention (one op over every chain of a packed tree)", () => {
  const loss = (w: tf.Tensor, f: (q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D) => tf.Tensor2D) => (a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(f(a as tf.Tensor3D, b as tf.Tensor3D, c as tf.Tensor3D), w));

  it("equals dense attention under the tree mask and per-chain attention, in output and in q, k, v gradients", () => {
    const rng = new Rng(11);
    for (const [nHead, nHeadKv, n] of [[4, 2, 23], [4, 4, 17], [2, 1, 30]] as const) {
      const hd = 8;
      const parents = branchyParents(rng, n);
      const segments = treeSegments(parents);
      expect(segments.length, "the test tree has several chains").toBeGreaterThan(3);
      const mask = treeMask(parents);
      const q = randomTensor(rng, [n, nHead, hd]) as tf.Tensor3D;
      const k = randomTensor(rng, [n, nHeadKv, hd]) as tf.Tensor3D;
      const v = randomTensor(rng, [n, nHeadKv, hd]) as tf.Tensor3D;
      const w = randomTensor(rng, [n, nHead * hd]);
      const tree = (a: tf.Tensor3D, b: tf.Tensor3D, c: tf.Tensor3D) => treeAttention(a, b, c, segments, 0.35);
      const dense = (a: tf.Tensor3D, b: tf.Tensor3D, c: tf.Tensor3D) => reference(a, b, c, mask, 0.35);
      // The unpacked path the op replaces: one attention op per chain over its gathered keys.
      const perChain = (a: tf.Tensor3D, b: tf.Tensor3D, c: tf.Tensor3D) =>
        tf.concat(
          segments.map((s) => {
            const idx = tf.tensor1d(s.keys, "int32");
            return attention(tf.slice(a, [s.start, 0, 0], [s.end - s.start, nHead, hd]), gatherRows(b, idx), gatherRows(c, idx), s.mask, 0.35);
          }),
        ) as tf.Tensor2D;
      const out = tree(q, k, v).dataSync() as Float32Array;
      expect(maxRel(out, dense(q, k, v).dataSync() as Float32Array)).toBeLessThan(1e-6);
      expect(maxRel(out, perChain(q, k, v).dataSync() as Float32Array)).toBeLessThan(1e-6);
      const got = tf.grads(loss(w, tree))([q, k, v]);
      for (const [name, f] of [["dense", dense], ["per-chain", perChain]] as const) {
        const want = tf.grads(loss(w, f))([q, k, v]);
        got.forEach((g, i) => expect(maxRel(g.dataSync() as Float32Array, want[i]!.dataSync() as Float32Array), `gradient ${"qkv"[i]} vs ${name} (${nHead}/${nHeadKv} heads)`).toBeLessThan(1e-5));
        tf.dispose(want);
      }
      tf.dispose([q, k, v, w, ...got]);
    }
  });

  it("has the gradient its central finite differences give (q, k and v, random coordinates)", () => {
    const rng = new Rng(5);
    const [n, nHead, nHeadKv, hd] = [12, 4, 2, 4];
    const segments = treeSegments(branchyParents(rng, n));
    const inputs = [randomTensor(rng, [n, nHead, hd]), randomTensor(rng, [n, nHeadKv, hd]), randomTensor(rng, [n, nHeadKv, hd])] as tf.Tensor3D[];
    const w = randomTensor(rng, [n, nHead * hd]);
    const f = loss(w, (a, b, c) => treeAttention(a, b, c, segments, 0.5));
    const grads = tf.grads(f)(inputs).map((g) => g.dataSync() as Float32Array);
    const value = (xs: tf.Tensor[]): number => tf.tidy(() => f(xs[0]!, xs[1]!, xs[2]!).dataSync()[0] as number);
    const eps = 1e-2;
    for (let which = 0; which < 3; which++) {
      const base = inputs[which]!.dataSync() as Float32Array;
      const g = grads[which]!;
      for (let t = 0; t < 8; t++) {
        const i = Math.floor(rng.float() * base.length);
        const shifted = (d: number) => {
          const data = Float32Array.from(base);
          data[i] = (data[i] as number) + d;
          const xs = inputs.slice();
          xs[which] = tf.tensor(data, inputs[which]!.shape);
          const y = value(xs);
          xs[which]!.dispose();
          return y;
        };
        const numeric = (shifted(eps) - shifted(-eps)) / (2 * eps);
        const scale = Math.max(...Array.from(g, Math.abs));
        expect(Math.abs(numeric - (g[i] as number)), `d/d${"qkv"[which]}[${i}]`).toBeLessThan(2e-2 * scale);
      }
    }
    tf.dispose([...inputs, w]);
  });

  it("refuses segments that do not cover the nodes in order or whose mask does not fit their keys", () => {
    const q = tf.zeros([3, 2, 4]) as tf.Tensor3D;
    const kv = tf.zeros([3, 1, 4]) as tf.Tensor3D;
    const segments = treeSegments([-1, 0, 1]);
    expect(() => treeAttention(q, kv, kv, segments.slice(0, 0), 1)).toThrow(/cover 0 of 3 nodes/);
    expect(() => treeAttention(q, kv, kv, [{ ...segments[0]!, start: 1 }], 1)).toThrow(/does not continue at node 0/);
    expect(() => treeAttention(q, kv, kv, [{ ...segments[0]!, mask: new Float32Array(2) }], 1)).toThrow(/mask of 2 entries for 3 keys/);
    tf.dispose([q, kv]);
  });
});
