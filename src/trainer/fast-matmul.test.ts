import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { linear, swapPairs } from "./fast-matmul.js";
import { tfWasm } from "./tf-runtime.js";

beforeAll(async () => {
  await tfWasm();
});

const rand = (rng: Rng, shape: number[]) => tf.tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.normal()), shape);

function maxRel(a: tf.Tensor, b: tf.Tensor): number {
  const x = a.dataSync();
  const y = b.dataSync();
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < x.length; i++) {
    diff = Math.max(diff, Math.abs((x[i] as number) - (y[i] as number)));
    scale = Math.max(scale, Math.abs(y[i] as number));
  }
  return diff / scale;
}

describe("fast-path products", () => {
  it("linear is x·wᵀ with tf.matMul's gradients for x and w", () => {
    const rng = new Rng(5);
    const x = rand(rng, [7, 6]) as tf.Tensor2D;
    const w = rand(rng, [4, 6]) as tf.Tensor2D;
    const up = rand(rng, [7, 4]);
    const f = (mm: (a: tf.Tensor2D, b: tf.Tensor2D) => tf.Tensor2D) => (a: tf.Tensor, b: tf.Tensor) => tf.sum(tf.mul(mm(a as tf.Tensor2D, b as tf.Tensor2D), up));
    const ref = (a: tf.Tensor2D, b: tf.Tensor2D): tf.Tensor2D => tf.matMul(a, b, false, true);
    expect(maxRel(linear(x, w), ref(x, w))).toBeLessThan(1e-6);
    const [gx, gw] = tf.grads(f(linear))([x, w]);
    const [rx, rw] = tf.grads(f(ref))([x, w]);
    expect(maxRel(gx!, rx!)).toBeLessThan(1e-6);
    expect(maxRel(gw!, rw!)).toBeLessThan(1e-6);
  });

  it("swapPairs swaps adjacent pairs exactly and sends the gradient back swapped", () => {
    const x = tf.tensor3d([1, 2, 3, 4, 5, 6, 7, 8], [2, 2, 2]);
    expect(Array.from(swapPairs(x).dataSync())).toEqual([2, 1, 4, 3, 6, 5, 8, 7]);
    const g = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(swapPairs(t), tf.tensor3d([1, 10, 100, 1000, 2, 20, 200, 2000], [2, 2, 2]))))(x);
    expect(Array.from(g.dataSync())).toEqual([10, 1, 1000, 100, 20, 2, 2000, 200]);
  });
});
