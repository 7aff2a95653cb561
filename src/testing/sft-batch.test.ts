import { describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { initWeights } from "../model/weights.js";
import { sftBatch } from "./sft-batch.js";
import { Trainer } from "../trainer/trainer.js";

describe("sftBatch", () => {
  it("weights each trained token 1/N, so the SFT loss is the mean NLL over trained tokens", async () => {
    const batch = sftBatch([
      { tokenIds: [1, 2, 3, 4], lossMask: [0, 0, 1, 1] },
      { tokenIds: [1, 2, 5], lossMask: [0, 1, 1] },
    ]);
    expect(batch.tree.terms.node.length).toBe(4);
    expect(Array.from(batch.tree.terms.weight)).toEqual([0.25, 0.25, 0.25, 0.25]);
    const cfg = tinyConfig({ nVocab: 8, nEmbd: 8, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 16, contextLength: 64 });
    const tr = await Trainer.create(cfg, initWeights(cfg, new Rng(1)));
    try {
      const lp = tr.logprobs(batch.tree);
      const mean = -lp.reduce((a, b) => a + b, 0) / lp.length;
      expect(tr.gradients(batch).loss).toBeCloseTo(mean, 5);
    } finally {
      tr.dispose();
    }
  });

  it("refuses a batch with nothing to learn", () => {
    expect(() => sftBatch([{ tokenIds: [1, 2], lossMask: [0, 0] }])).toThrow(/no token of the batch has loss mask 1/);
  });
});
