import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, describe, expect, it } from "vitest";
import { buildPackedTree, type TreeSampleInput } from "../batch/tree/build-tree.js";
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { Vocab } from "../model/vocab.js";
import { initWeights } from "../model/weights.js";
import { causalMask } from "./attention-mask.js";
import { Trainer, type TrainBatch } from "./trainer.js";

const root = mkdtempSync(join(tmpdir(), "arbor-trainer-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const cfg = tinyConfig({ nVocab: 24, nEmbd: 16, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 32, contextLength: 256 });
const weights = () => initWeights(cfg, new Rng(5));

function sample(tokens: number[], advantage: number, weight: number): TreeSampleInput {
  return {
    tokenIds: tokens,
    lossMask: tokens.map((_, i) => (i >= 2 ? 1 : 0)),
    advantages: tokens.map(() => advantage),
    oldLogprobs: tokens.map(() => -Math.log(cfg.nVocab)),
    weights: tokens.map((_, i) => (i >= 2 ? weight : 0)),
  };
}

describe("Trainer", () => {
  it("SFT steps drive the loss of a fixed batch down; the version advances per step", async () => {
    const clock = new VirtualClock(0);
    const tr = await Trainer.create(cfg, weights(), { lr: 1e-2, clock });
    try {
      const { tree } = buildPackedTree([sample([1, 2, 3, 4, 5, 6], 0, 1 / 8), sample([1, 2, 3, 7, 8], 0, 1 / 8)]);
      const batch: TrainBatch = { tree, loss: "sft" };
      const first = tr.step(batch);
      expect(first.version).toBe(1);
      expect(first.tokens).toBe(tree.tokens.length);
      expect(first.terms).toBe(7);
      expect(first.ms).toBe(0); // the virtual clock did not move
      expect(first.loss).toBeCloseTo((7 / 8) * Math.log(cfg.nVocab), 1); // Σ weights · log V: near-uniform at init
      let last = first;
      for (let i = 0; i < 30; i++) last = tr.step(batch);
      expect(last.version).toBe(31);
      expect(tr.stepCount).toBe(31);
      expect(last.loss).toBeLessThan(first.loss * 0.5);
    } finally {
      tr.dispose();
    }
  });

  it("a GRPO-style step raises the logprob of the positive-advantage sample and lowers the negative one", async () => {
    const tr = await Trainer.create(cfg, weights(), { lr: 5e-3 });
    try {
      const { tree } = buildPackedTree([sample([1, 2, 3, 4, 5], 1, 1 / 6), sample([1, 2, 9, 10, 11], -1, 1 / 6)]);
      const batch: TrainBatch = { tree, termUnit: tree.terms.sample, loss: { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean" } };
      const sumBy = (lp: Float32Array, s: number) => lp.reduce((a, x, j) => a + (tree.terms.sample[j] === s ? x : 0), 0);
      const before = tr.logprobs(tree);
      const r = tr.step(batch);
      const after = tr.logprobs(tree);
      expect(r.clipFraction).toBe(0);
      expect(sumBy(after, 0)).toBeGreaterThan(sumBy(before, 0));
      expect(sumBy(after, 1)).toBeLessThan(sumBy(before, 1));
    } finally {
      tr.dispose();
    }
  });

  it("epochs: k optimizer steps on one batch against its old logprobs, one version; the clip bounds the later ones", async () => {
    const clip = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean" } as const;
    const { tree } = buildPackedTree([sample([1, 2, 3, 4, 5], 1, 1 / 6), sample([1, 2, 9, 10, 11], -1, 1 / 6)]);
    const batch: TrainBatch = { tree, termUnit: tree.terms.sample, loss: clip };
    const lrs: number[] = [];
    const a = await Trainer.create(cfg, weights(), { lr: 5e-2 });
    const b = await Trainer.create(cfg, weights(), { lr: 5e-2 });
    try {
      const r = a.step(batch, { epochs: 4, lrAt: (n) => (lrs.push(n), 5e-2) });
      expect(r.version).toBe(1); // one published version per batch
      expect(a.stepCount).toBe(4);
      expect(lrs).toEqual([1, 2, 3, 4]);
      expect(r.epochs).toHaveLength(4);
      // The first epoch runs on the weights the batch came from (near-uniform, its old logprobs): ratio ≈ 1, no clip.
      expect(r.epochs[0]?.clipFraction).toBe(0);
      expect(r.loss).toBe(r.epochs[0]?.loss);
      // Later epochs see ratios moved off 1 and the clip stops some terms' gradient.
      expect(Math.max(...r.epochs.slice(1).map((e) => e.clipFraction))).toBeGreaterThan(0);
      expect(r.clipFraction).toBeCloseTo(r.epochs.reduce((x, e) => x + e.clipFraction, 0) / 4, 12);
      const ratios = Array.from(a.logprobs(tree), (lp, j) => Math.exp(lp - (tree.terms.oldLogprob[j] as number)));
      expect(Math.max(...ratios.map((q) => Math.abs(q - 1)))).toBeGreaterThan(0.2);
      // The same as four single steps on the batch (the ratio is always against the batch's old logprobs).
      for (let i = 0; i < 4; i++) b.step(batch);
      expect(b.version).toBe(4);
      const la = a.logprobs(tree);
      b.logprobs(tree).forEach((x, j) => expect(la[j]).toBeCloseTo(x, 5));
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it("epochs: the dual clip bounds a negative-advantage term whose ratio ran above c, in every epoch", async () => {
    const { tree } = buildPackedTree([sample([1, 2, 3, 4, 5], 1, 1 / 6), sample([1, 2, 9, 10, 11], -1, 1 / 6)]);
    // The negative sample's behaviour logprobs 2 nats below the near-uniform policy's: ratio ≈ e² ≈ 7.4 > c = 3.
    const old = Float32Array.from(tree.terms.oldLogprob, (x, j) => (tree.terms.sample[j] === 1 ? x - 2 : x));
    const crafted = { ...tree, terms: { ...tree.terms, oldLogprob: old } };
    const loss = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean", clipRatioC: 3 } as const;
    const tr = await Trainer.create(cfg, weights(), { lr: 1e-2 });
    try {
      const r = tr.step({ tree: crafted, termUnit: tree.terms.sample, loss }, { epochs: 2 });
      // 3 of the 6 terms are the negative sample's; the dual clip bounds them (and zeroes their gradient) in both epochs.
      expect(r.epochs.map((e) => e.dualClipFraction)).toEqual([0.5, 0.5]);
      expect(r.dualClipFraction).toBe(0.5);
    } finally {
      tr.dispose();
    }
  });

  it("rejects epochs that are not a positive integer", async () => {
    const tr = await Trainer.create(cfg, weights(), { lr: 1e-2 });
    try {
      const { tree } = buildPackedTree([sample([1, 2, 3, 4], 0, 1)]);
      expect(() => tr.step({ tree, loss: "sft" }, { epochs: 0 })).toThrow(/epochs must be an integer ≥ 1, got 0/);
      expect(tr.version).toBe(0);
    } finally {
      tr.dispose();
    }
  });

  it("reports the policy's mean token entropy over the loss terms from its own logits, before the step, in every layout", async () => {
    const samples = [sample([1, 2, 3, 4, 5], 1, 1 / 6), sample([1, 2, 9, 10, 11], -1, 1 / 6)];
    const { tree } = buildPackedTree(samples);
    const clip = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean" } as const;
    const batch: TrainBatch = { tree, termUnit: tree.terms.sample, loss: clip };
    // The reference: each sample run causally on its own, its logits at rows 1..L−2 (the rows predicting the
    // loss tokens 2..L−1), −Σ p ln p in float64, averaged over the 6 terms.
    const expected = await (async () => {
      const tr = await Trainer.create(cfg, weights());
      try {
        const hs: number[] = [];
        for (const s of samples) {
          const n = s.tokenIds.length;
          const rows = Array.from({ length: n - 2 }, (_, i) => i + 1);
          const logits = tf.tidy(() => {
            const hidden = tr.model.hidden(s.tokenIds, Int32Array.from(s.tokenIds, (_, i) => i), { kind: "dense", mask: causalMask(n) });
            return tr.model.logits(hidden, rows).arraySync() as number[][];
          });
          for (const row of logits) {
            const m = Math.max(...row);
            const z = row.reduce((a, x) => a + Math.exp(x - m), 0);
            hs.push(-row.reduce((a, x) => a + (Math.exp(x - m) / z) * (x - m - Math.log(z)), 0));
          }
        }
        return hs.reduce((a, h) => a + h, 0) / hs.length;
      } finally {
        tr.dispose();
      }
    })();
    expect(expected).toBeGreaterThan(0);
    expect(expected).toBeLessThanOrEqual(Math.log(cfg.nVocab) + 1e-9);
    for (const opts of [{ layout: "tree" }, { layout: "flat" }, { layout: "tree", maxStepBytes: 1 }] as const) {
      const tr = await Trainer.create(cfg, weights(), { lr: 5e-2, ...opts });
      try {
        const r = tr.step(batch, { epochs: 3 });
        expect(r.microBatches).toBe("maxStepBytes" in opts ? 2 : 1);
        expect(r.entropy).toBeCloseTo(expected, 5);
        // Later epochs moved the weights, but the reported entropy is the first pass's (before the step).
        expect(tr.step(batch).entropy).not.toBeCloseTo(expected, 5);
      } finally {
        tr.dispose();
      }
    }
  });

  it("reports the pre-clip global gradient norm and the tokens of the chosen layout", async () => {
    const flat = await Trainer.create(cfg, weights(), { layout: "flat", maxGradNorm: 1e-3 });
    try {
      const { tree } = buildPackedTree([sample([1, 2, 3, 4, 5, 6], 1, 0.1), sample([1, 2, 3, 4, 7], -1, 0.1), sample([1, 2, 3, 4, 5, 8], 0.5, 0.1)]);
      const batch: TrainBatch = { tree, loss: { ratio: "token", objective: "cispo", epsLow: 1, epsHigh: 0.28, normaliser: "token-mean" } };
      const g = flat.gradients(batch);
      let sq = 0;
      for (const v of g.grads.values()) for (const x of v) sq += x * x;
      const r = flat.step(batch);
      expect(r.gradNorm).toBeCloseTo(Math.sqrt(sq), 6);
      expect(r.gradNorm).toBeGreaterThan(1e-3); // so this step was clipped
      expect(r.tokens).toBe(6 + 5 + 6);
      expect(tree.tokens.length).toBe(8);
    } finally {
      flat.dispose();
    }
  });

  it("checkpoints to GGUF and resumes from it with the same weights and version", async () => {
    const vocab = new Vocab();
    const big = tinyConfig({ nVocab: vocab.size, nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 32, contextLength: 1024 });
    const tr = await Trainer.create(big, initWeights(big, new Rng(2)), { version: 10 });
    try {
      const { tree } = buildPackedTree([{ ...sample([1, 40, 41, 42], 0, 0.5) }]);
      tr.step({ tree, loss: "sft" });
      const { path, manifest } = tr.checkpoint(root);
      expect(manifest.version).toBe(11);
      expect(path).toBe(join(root, "policy-v11.gguf"));
      const back = await Trainer.fromGguf(path);
      try {
        expect(back.version).toBe(11);
        expect(back.model.toTensors()).toEqual(tr.model.toTensors());
        expect(back.logprobs(tree)).toEqual(tr.logprobs(tree));
      } finally {
        back.dispose();
      }
    } finally {
      tr.dispose();
    }
  });

  it("rejects batches it cannot train on, naming the problem", async () => {
    const tr = await Trainer.create(cfg, weights());
    try {
      const { tree } = buildPackedTree([sample([1, 2, 3, 4], 1, 0.5)]);
      const seq = { ratio: "sequence", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "sample-mean" } as const;
      expect(() => tr.step({ tree, loss: seq })).toThrow(/'sequence' ratio needs the batch's termUnit/);
      expect(() => tr.step({ tree, termUnit: new Int32Array(1), loss: seq })).toThrow(/termUnit has 1 entries for 2 terms/);
      const { tree: empty } = buildPackedTree([{ ...sample([1, 2], 0, 0), lossMask: [0, 0] }]);
      expect(() => tr.step({ tree: empty, loss: "sft" })).toThrow(/no loss terms/);
      const { tree: oov } = buildPackedTree([sample([1, 2, 99], 1, 1)]);
      expect(() => tr.step({ tree: oov, loss: "sft" })).toThrow(/token 99 at 2 is outside the vocabulary/);
      expect(tr.version).toBe(0);
    } finally {
      tr.dispose();
    }
  });
});
