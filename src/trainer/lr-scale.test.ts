import * as tf from "@tensorflow/tfjs";
import { describe, expect, it } from "vitest";
import { buildPackedTree } from "../batch/tree/build-tree.js";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { initWeights } from "../model/weights.js";
import { compileLrScale, withLrScale } from "./lr-scale.js";
import { tfWasm } from "./tf-runtime.js";
import { Trainer, type TrainBatch } from "./trainer.js";

const cfg = tinyConfig({ nVocab: 24, nEmbd: 16, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 32, contextLength: 64 });
const names = ["token_embd.weight", "blk.0.attn_norm.weight", "blk.1.attn_norm.weight", "output_norm.weight", "output.weight"];

describe("compileLrScale", () => {
  it("resolves exact names and * patterns; the first pattern naming a tensor wins", () => {
    const s = compileLrScale({ "output_norm.weight": 100, "blk.*.attn_norm.weight": 3, "*norm*": 7 }, names);
    expect([...s.scaled]).toEqual([
      ["output_norm.weight", 100],
      ["blk.0.attn_norm.weight", 3],
      ["blk.1.attn_norm.weight", 3],
    ]);
  });

  it("names the key when a pattern matches nothing or a multiplier is not positive", () => {
    expect(() => compileLrScale({ "output_norm": 2 }, names)).toThrow(/lrScale\['output_norm'\] matches no parameter/);
    expect(() => compileLrScale({ "output.weight": 0 }, names)).toThrow(ArborError);
    expect(() => compileLrScale({ "output.weight": Number.NaN }, names)).toThrow(/lrScale\['output.weight'\] must be a positive number/);
  });
});

describe("withLrScale", () => {
  it("stretches a tensor's update by its multiplier: w0 + c·(w1 − w0)", async () => {
    await tfWasm();
    const v = tf.variable(tf.tensor1d([1, 2, 3]), true, "lr-scale-test/v");
    try {
      const scale = compileLrScale({ v: 4 }, ["v"]);
      withLrScale(scale, () => v, () => v.assign(tf.tensor1d([1.5, 2, 2.75])));
      // Updates 0.5, 0, −0.25 stretched ×4: 1 + 2, 2, 3 − 1.
      expect(Array.from(v.dataSync())).toEqual([3, 2, 2]);
    } finally {
      v.dispose();
    }
  });
});

describe("Trainer with lrScale", () => {
  it("one Adam step moves the scaled tensor exactly c times as far and every other tensor as without it", async () => {
    const tokens = [1, 2, 3, 4, 5, 6];
    const { tree } = buildPackedTree([
      { tokenIds: tokens, lossMask: tokens.map((_, i) => (i >= 2 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => -3), weights: tokens.map((_, i) => (i >= 2 ? 0.25 : 0)) },
    ]);
    const batch: TrainBatch = { tree, loss: "sft" };
    const w0 = initWeights(cfg, new Rng(5));
    const deltas = async (lrScale?: Record<string, number>) => {
      const tr = await Trainer.create(cfg, w0, { lr: 1e-3, ...(lrScale ? { lrScale } : {}) });
      try {
        tr.step(batch);
        const after = new Map(tr.model.toTensors().map((t) => [t.name, t.data]));
        return new Map(w0.map((t) => [t.name, Float32Array.from(t.data, (x, i) => ((after.get(t.name) as Float32Array)[i] as number) - x)]));
      } finally {
        tr.dispose();
      }
    };
    const plain = await deltas();
    const scaled = await deltas({ "output_norm.weight": 10 });
    for (const [name, d] of plain) {
      const s = scaled.get(name) as Float32Array;
      const c = name === "output_norm.weight" ? 10 : 1;
      // Adam's first step moves every coordinate by about lr, so the scaled one moves by about 10 × 1e-3.
      if (name === "output_norm.weight") expect(Math.max(...Array.from(s, Math.abs))).toBeGreaterThan(5e-3);
      d.forEach((x, i) => expect(s[i]).toBeCloseTo(c * x, 6));
    }
  });

  it("refuses a pattern that names no parameter, naming the key", async () => {
    await expect(Trainer.create(cfg, initWeights(cfg, new Rng(5)), { lrScale: { "final_norm.weight": 10 } })).rejects.toThrow(/lrScale\['final_norm.weight'\] matches no parameter/);
  });
});
