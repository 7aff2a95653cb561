import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { clipByGlobalNorm, globalNorm } from "./grad-clip.js";
import { tfWasm } from "./tf-runtime.js";

beforeAll(async () => {
  await tfWasm();
});

describe("clipByGlobalNorm", () => {
  it("computes one norm over all tensors and scales every gradient by the same factor", () => {
    const grads = { a: tf.tensor1d([3, 0]), b: tf.tensor2d([0, 4], [1, 2]) };
    expect(globalNorm(grads)).toBeCloseTo(5, 6);
    const { norm, grads: out } = clipByGlobalNorm(grads, 1);
    expect(norm).toBeCloseTo(5, 6);
    expect(Array.from(out.a!.dataSync())[0]).toBeCloseTo(0.6, 5);
    expect(Array.from(out.b!.dataSync())[1]).toBeCloseTo(0.8, 5);
    expect(globalNorm(out)).toBeCloseTo(1, 5);
    tf.dispose(out);
  });

  it("leaves gradients under the limit untouched and refuses non-finite norms", () => {
    const grads = { a: tf.tensor1d([0.3, 0.4]) };
    const r = clipByGlobalNorm(grads, 1);
    expect(r.grads).toBe(grads);
    expect(r.norm).toBeCloseTo(0.5, 6);
    expect(() => clipByGlobalNorm({ a: tf.tensor1d([NaN]) }, 1)).toThrow(/gradient norm is NaN; the step was not applied/);
    expect(() => clipByGlobalNorm(grads, 0)).toThrow(/maxGradNorm must be > 0/);
    tf.dispose(grads);
  });
});
