import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tfWasm } from "./tf-runtime.js";
import { topKKl, topKKlLoss, topKTargets } from "./top-k-kl.js";

beforeAll(async () => {
  await tfWasm();
});

describe("topKTargets", () => {
  it("keeps the K most likely tokens, renormalised, best first (ties: lower id first)", () => {
    // Row 0: softmax restricted to ids 2 and 0 (logits 2 and 1): e^1/(e^1+1) and 1/(e^1+1).
    // Row 1: all equal → ids 0, 1 at 1/2 each.
    const t = topKTargets([1, 0, 2, -1, 5, 5, 5, 5], 4, 2);
    expect(t.rows).toBe(2);
    expect(Array.from(t.ids)).toEqual([2, 0, 0, 1]);
    const e = Math.E;
    expect(t.probs[0]).toBeCloseTo(e / (e + 1), 6);
    expect(t.probs[1]).toBeCloseTo(1 / (e + 1), 6);
    expect(t.probs[2]).toBeCloseTo(0.5, 6);
    expect(t.probs[3]).toBeCloseTo(0.5, 6);
  });

  it("refuses a K outside the vocabulary and logits that are not whole rows", () => {
    expect(() => topKTargets([0, 0, 0], 3, 0)).toThrow(/topK must be an integer in 1\.\.3/);
    expect(() => topKTargets([0, 0, 0], 3, 4)).toThrow(/topK/);
    expect(() => topKTargets([0, 0, 0, 0], 3, 1)).toThrow(/not a whole number of rows of 3/);
  });
});

describe("topKKl", () => {
  it("matches a hand-worked value: p̃ = (3/4, 1/4) on ids 0,1 against a uniform draft over 4 tokens", () => {
    const targets = { rows: 1, k: 2, ids: Int32Array.from([0, 1]), probs: Float32Array.from([0.75, 0.25]) };
    const { loss, grad } = topKKl([0, 0, 0, 0], 4, targets);
    // KL = 0.75 ln(0.75/0.25) + 0.25 ln(0.25/0.25) = 0.75 ln 3.
    expect(loss).toBeCloseTo(0.75 * Math.log(3), 6);
    // q − p̃ = (0.25−0.75, 0.25−0.25, 0.25, 0.25).
    expect(Array.from(grad)).toEqual([-0.5, 0, 0.25, 0.25].map((x) => expect.closeTo(x, 6)));
  });

  it("is 0 with zero gradient where the draft equals the policy restricted to its top K", () => {
    // The draft puts -inf-like mass outside K: its softmax equals p̃ up to e^-40.
    const policy = [2, 1, -40, -40];
    const targets = topKTargets(policy, 4, 2);
    const { loss, grad } = topKKl(policy, 4, targets);
    expect(loss).toBeCloseTo(0, 6); // p̃ is stored in float32
    for (const g of grad) expect(Math.abs(g)).toBeLessThan(1e-6);
  });

  it("has the gradient finite differences give, and tfjs's loss and gradient equal it", () => {
    const rng = new Rng(17);
    const nVocab = 9;
    const rows = 3;
    const policy = Array.from({ length: rows * nVocab }, () => 2 * rng.normal());
    const draft = Array.from({ length: rows * nVocab }, () => rng.normal());
    const targets = topKTargets(policy, nVocab, 4);
    const { loss, grad } = topKKl(draft, nVocab, targets);
    expect(loss).toBeGreaterThan(0);
    const h = 1e-6;
    for (let i = 0; i < draft.length; i++) {
      const up = draft.slice();
      const down = draft.slice();
      up[i] = (up[i] as number) + h;
      down[i] = (down[i] as number) - h;
      const fd = (topKKl(up, nVocab, targets).loss - topKKl(down, nVocab, targets).loss) / (2 * h);
      expect(grad[i]).toBeCloseTo(fd, 6);
    }
    const z = tf.tensor2d(draft, [rows, nVocab]);
    const { value, grad: tg } = tf.valueAndGrad((x: tf.Tensor) => topKKlLoss(x as tf.Tensor2D, targets))(z);
    expect(value.dataSync()[0]).toBeCloseTo(loss, 5);
    const tgv = tg.dataSync();
    for (let i = 0; i < draft.length; i++) expect(tgv[i]).toBeCloseTo(grad[i] as number, 5);
    tf.dispose([z, value, tg]);
  });

  it("refuses targets that do not fit the logits, naming the mismatch", () => {
    const targets = { rows: 2, k: 1, ids: Int32Array.from([0, 1]), probs: Float32Array.from([1, 1]) };
    expect(() => topKKl([0, 0, 0], 3, targets)).toThrow(/2 rows for 1 rows/);
    const bad = { rows: 1, k: 1, ids: Int32Array.from([7]), probs: Float32Array.from([1]) };
    expect(() => topKKl([0, 0, 0], 3, bad)).toThrow(/target id 7 .* outside the vocabulary/);
    expect(() => topKKlLoss(tf.zeros([1, 3]) as tf.Tensor2D, bad)).toThrow(/outside the vocabulary/);
  });
});
