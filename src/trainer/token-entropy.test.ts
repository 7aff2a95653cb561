import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { tfWasm } from "./tf-runtime.js";
import { meanEntropy, tokenEntropy } from "./token-entropy.js";

beforeAll(async () => {
  await tfWasm();
});

const entropies = (rows: number[][]): number[] => tf.tidy(() => Array.from(tokenEntropy(tf.tensor2d(rows)).dataSync()));

describe("tokenEntropy", () => {
  it("equals hand-worked entropies in nats", () => {
    const [uniform, shifted, skewed, twoPoint] = entropies([
      [0, 0, 0, 0], // uniform over 4: ln 4
      [5, 5, 5, 5], // a constant shift changes nothing
      [0, Math.log(3), -1e4, -1e4], // p = (1/4, 3/4, ~0, ~0): −(¼ ln ¼ + ¾ ln ¾)
      [Math.log(0.9), Math.log(0.1), -1e4, -1e4], // p = (0.9, 0.1): −(0.9 ln 0.9 + 0.1 ln 0.1)
    ]);
    expect(uniform).toBeCloseTo(1.3862944, 5);
    expect(shifted).toBeCloseTo(1.3862944, 5);
    expect(skewed).toBeCloseTo(0.25 * Math.log(4) + 0.75 * Math.log(4 / 3), 5); // 0.5623351
    expect(skewed).toBeCloseTo(0.5623351, 5);
    expect(twoPoint).toBeCloseTo(0.3250830, 5);
  });

  it("is 0, not NaN, for a distribution with one token (probabilities that underflow to 0)", () => {
    const [h] = entropies([[1000, 0, -1000]]);
    expect(Number.isNaN(h)).toBe(false);
    expect(h).toBeCloseTo(0, 6);
  });

  it("the batch's mean is the plain mean over terms; no terms is NaN (written as null)", () => {
    expect(meanEntropy([Math.log(4), 0.5623351])).toBeCloseTo((1.3862944 + 0.5623351) / 2, 6);
    expect(meanEntropy([])).toBeNaN();
  });
});
