import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { referenceLoss, type LossSpec } from "../batch/estimators/loss-spec.js";
import { createEstimator } from "../batch/estimators/registry.js";
import { Rng } from "../core/rng.js";
import { policyLoss, sftLoss, type PolicyTerms } from "./losses.js";
import { tfWasm } from "./tf-runtime.js";
import { TEST_ESTIMATORS } from "../testing/test-batches.js";

beforeAll(async () => {
  await tfWasm();
});

const CLIP: LossSpec = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.28, normaliser: "token-mean" };

/** Loss value and d loss / d logprob for the given term logprobs. */
function lossAndGrad(spec: LossSpec, lp: number[], terms: PolicyTerms): { loss: number; grad: number[] } {
  const x = tf.tensor1d(lp);
  const { value, grad } = tf.valueAndGrad((t: tf.Tensor) => policyLoss(spec, t as tf.Tensor1D, terms))(x);
  const out = { loss: value.dataSync()[0] as number, grad: Array.from(grad.dataSync()) };
  tf.dispose([x, value, grad]);
  return out;
}

describe("policyLoss", () => {
  it("equals the batch module's float64 referenceLoss for every estimator's LossSpec", () => {
    const rng = new Rng(4);
    for (const name of TEST_ESTIMATORS) {
      const spec = createEstimator(name).loss;
      for (let trial = 0; trial < 5; trial++) {
        const n = 24;
        const logprob = Array.from({ length: n }, () => -1 - 2 * rng.float());
        const oldLogprob = logprob.map((x) => x + 0.6 * rng.normal());
        const terms: PolicyTerms = {
          oldLogprob,
          advantage: Array.from({ length: n }, () => rng.normal()),
          weight: Array.from({ length: n }, () => rng.float() / n),
          // Units of 1..6 contiguous terms, as samples/chunks are.
          unit: Array.from({ length: n }, (_, t) => Math.floor(t / (1 + (trial % 6)))),
          trainerOldLogprob: logprob.map((x) => x + 0.5 * rng.normal()),
        };
        const ref = referenceLoss(spec, { logprob, ...terms });
        const { loss } = lossAndGrad(spec, logprob, terms);
        expect(loss, `${name} trial ${trial}`).toBeCloseTo(ref.loss, 5);
      }
    }
  });

  it("dual clip (c = 3): a negative-advantage term bounded at −c·A has no gradient; the loss matches by hand", () => {
    // The terms of loss-spec.test.ts's dual-clip case: ρ = [e^1.5, 2, e^1.5, e^−0.5], A = [−1, −1, 1, −0.5], w = 0.25.
    const spec: LossSpec = { ...CLIP, epsHigh: 0.2, clipRatioC: 3 };
    const terms: PolicyTerms = { oldLogprob: [-2.5, -1 - Math.log(2), -2.5, -0.5], advantage: [-1, -1, 1, -0.5], weight: [0.25, 0.25, 0.25, 0.25], unit: [0, 1, 2, 3] };
    const { loss, grad } = lossAndGrad(spec, [-1, -1, -1, -1], terms);
    expect(loss).toBeCloseTo(1.05, 5);
    expect(grad[0]).toBe(0);
    expect(grad[1]).toBeCloseTo(0.5, 5);
    expect(grad[2]).toBe(0);
    expect(grad[3]).toBe(0);
    // Without the dual clip term 0 pulls with −w·A·ρ = 0.25·e^1.5.
    const plain = lossAndGrad({ ...spec, clipRatioC: undefined }, [-1, -1, -1, -1], terms);
    expect(plain.grad[0]).toBeCloseTo(0.25 * Math.exp(1.5), 4);
    expect(plain.loss).toBeCloseTo(0.25 * (Math.exp(1.5) + 2 - 1.2 + 0.4), 4);
  });

  it("PPO-clip: gradient −w·A·ρ inside the trust region, 0 where the clipped side is the minimum", () => {
    // Terms: (A>0, ρ=e^0.1 inside), (A>0, ρ=e^0.5 above 1+ε), (A<0, ρ=e^−0.5 below 1−ε), (A<0, ρ=e^0.5 above: not clipped).
    const lp = [-1, -1, -1, -1];
    const old = [-1.1, -1.5, -0.5, -1.5];
    const adv = [1, 1, -1, -1];
    const w = [0.25, 0.25, 0.25, 0.25];
    const { grad } = lossAndGrad(CLIP, lp, { oldLogprob: old, advantage: adv, weight: w, unit: [0, 1, 2, 3] });
    expect(grad[0]).toBeCloseTo(-0.25 * Math.exp(0.1), 6);
    expect(grad[1]).toBe(0);
    expect(grad[2]).toBe(0);
    expect(grad[3]).toBeCloseTo(0.25 * Math.exp(0.5), 5);
  });

  it("CISPO: the clipped IS weight is a constant, so clipped terms still get gradient −w·clip(ρ)·A", () => {
    const spec: LossSpec = { ratio: "token", objective: "cispo", epsLow: 1, epsHigh: 0.28, normaliser: "token-mean" };
    const { grad } = lossAndGrad(spec, [-1, -1], { oldLogprob: [-1.1, -1.5], advantage: [1, 2], weight: [0.5, 0.5], unit: [0, 1] });
    expect(grad[0]).toBeCloseTo(-0.5 * Math.exp(0.1), 6);
    expect(grad[1]).toBeCloseTo(-0.5 * 1.28 * 2, 6);
  });

  it("GSPO sequence ratio: every term of a unit gets the unit's gradient share", () => {
    const spec: LossSpec = { ratio: "sequence", objective: "clip", epsLow: 0.5, epsHigh: 0.5, normaliser: "sample-mean" };
    const lp = [-1, -2, -3, -1];
    const old = [-1.1, -2.1, -2.9, -1];
    const adv = [1, 1, 1, -1];
    const w = [0.1, 0.2, 0.3, 0.4];
    const { grad } = lossAndGrad(spec, lp, { oldLogprob: old, advantage: adv, weight: w, unit: [7, 7, 7, 9] });
    const rho = Math.exp((0.1 + 0.1 - 0.1) / 3);
    const share = (-(0.1 + 0.2 + 0.3) * rho) / 3;
    expect(grad[0]).toBeCloseTo(share, 6);
    expect(grad[1]).toBeCloseTo(share, 6);
    expect(grad[2]).toBeCloseTo(share, 6);
    expect(grad[3]).toBeCloseTo(0.4, 6);
  });

  it("chunk mismatch mask drops units whose trainer/engine ratio exceeds H (no loss, no gradient)", () => {
    const spec: LossSpec = { ratio: "chunk", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "unit-mean", mismatchThreshold: 2 };
    const terms: PolicyTerms = { oldLogprob: [-1, -1, -3, -3], advantage: [1, 1, 1, 1], weight: [0.25, 0.25, 0.25, 0.25], unit: [0, 0, 1, 1], trainerOldLogprob: [-1, -1, -1, -1] };
    const { loss, grad } = lossAndGrad(spec, [-1, -1, -1, -1], terms);
    const ref = referenceLoss(spec, { logprob: [-1, -1, -1, -1], ...terms });
    expect(ref.maskedUnits).toBe(1);
    expect(loss).toBeCloseTo(ref.loss, 6);
    expect(loss).toBeCloseTo(-0.5, 6);
    expect(grad.slice(2)).toEqual([0, 0]);
  });

  it("names the field when term arrays disagree in length", () => {
    const lp = tf.tensor1d([-1, -2]);
    expect(() => policyLoss(CLIP, lp, { oldLogprob: [0], advantage: [1, 1], weight: [1, 1], unit: [0, 1] })).toThrow(/oldLogprob has 1 entries for 2 terms/);
    expect(() => policyLoss({ ...CLIP, epsLow: -1 }, lp, { oldLogprob: [0, 0], advantage: [1, 1], weight: [1, 1], unit: [0, 1] })).toThrow(/epsLow/);
    lp.dispose();
  });
});

describe("sftLoss", () => {
  it("is the weighted negative log-likelihood with gradient −w", () => {
    const x = tf.tensor1d([-1, -3]);
    const { value, grad } = tf.valueAndGrad((t: tf.Tensor) => sftLoss(t as tf.Tensor1D, [0.5, 0.25]))(x);
    expect(value.dataSync()[0]).toBeCloseTo(1.25, 6);
    expect(Array.from(grad.dataSync())).toEqual([-0.5, -0.25]);
    expect(() => sftLoss(x, [1])).toThrow(/weight has 1 entries for 2 terms/);
    tf.dispose([x, value, grad]);
  });
});
