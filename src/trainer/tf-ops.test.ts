import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { gatherRows, stopGradient } from "./tf-ops.js";
import { tfWasm } from "./tf-runtime.js";

beforeAll(async () => {
  await tfWasm();
});

describe("gatherRows / stopGradient on wasm", () => {
  it("gathers rows and accumulates the gradient of duplicate indices", () => {
    const x = tf.tensor2d([1, 2, 3, 4, 5, 6], [3, 2]);
    const idx = tf.tensor1d([2, 0, 2], "int32");
    expect(Array.from(gatherRows(x, idx).dataSync())).toEqual([5, 6, 1, 2, 5, 6]);
    const g = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(gatherRows(t, idx), tf.tensor2d([1, 10, 100, 1000, 2, 20], [3, 2]))))(x);
    expect(Array.from(g.dataSync())).toEqual([100, 1000, 0, 0, 3, 30]);
    tf.dispose([x, idx, g]);
  });

  it("stopGradient passes the value and blocks the gradient", () => {
    const x = tf.tensor1d([2, 3]);
    const g = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(stopGradient(t), t)))(x);
    expect(Array.from(g.dataSync())).toEqual([2, 3]);
    tf.dispose([x, g]);
  });
});
