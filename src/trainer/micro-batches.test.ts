import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildPackedTree, unpackSamples, type TreeSampleInput } from "../batch/tree/build-tree.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { initWeights } from "../model/weights.js";
import { checkContext, planMicroBatches, subTree } from "./micro-batches.js";
import { batchSpecArb, specBatch } from "../testing/test-batches.js";
import { Trainer, type TrainBatch } from "./trainer.js";

const cfg = tinyConfig({ nVocab: 24, nEmbd: 16, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 32, contextLength: 64 });

function sample(tokens: number[], advantage: number, weight: number): TreeSampleInput {
  return {
    tokenIds: tokens,
    lossMask: tokens.map((_, i) => (i >= 2 ? 1 : 0)),
    advantages: tokens.map(() => advantage),
    oldLogprobs: tokens.map(() => -Math.log(cfg.nVocab) + 0.1 * Math.sin(advantage + tokens.length)),
    weights: tokens.map((_, i) => (i >= 2 ? weight : 0)),
  };
}

describe("subTree", () => {
  it("keeps exactly the chosen samples' tokens, terms and pre-order", () => {
    fc.assert(
      fc.property(batchSpecArb(6), fc.nat(), (spec, pick) => {
        const b = specBatch(spec);
        if (!b) return;
        const tree = b.tree;
        const all = unpackSamples(tree);
        const chosen = all.map((_, s) => s).filter((s) => ((pick >> s % 30) & 1) === 1 || s === 0);
        const sub = subTree(tree, chosen);
        expect(unpackSamples(sub.tree)).toEqual(chosen.map((s) => all[s]));
        for (let i = 0; i < sub.tree.parents.length; i++) expect(sub.tree.parents[i]).toBeLessThan(i);
        sub.terms.forEach((j, i) => {
          expect(chosen[sub.tree.terms.sample[i] as number]).toBe(tree.terms.sample[j]);
          expect(sub.tree.terms.target[i]).toBe(tree.terms.target[j]);
          expect(sub.tree.terms.weight[i]).toBe(tree.terms.weight[j]);
          expect(sub.tree.tokens[sub.tree.terms.node[i] as number]).toBe(tree.tokens[tree.terms.node[j] as number]);
        });
        expect(sub.terms.length).toBe(tree.terms.sample.filter((s) => chosen.includes(s)).length);
      }),
      { numRuns: 60 },
    );
  });
});

describe("planMicroBatches", () => {
  const { tree } = buildPackedTree([sample([1, 2, 3, 4, 5, 6], 1, 0.1), sample([1, 2, 3, 7, 8], -1, 0.1), sample([9, 2, 3, 4], 0.5, 0.1), sample([9, 2, 5, 5, 5, 5, 5], -0.5, 0.1)]);

  it("is one pass when the batch fits, and splits by consecutive samples when it does not", () => {
    expect(planMicroBatches(tree, cfg, "tree", 1 << 30)).toHaveLength(1);
    const split = planMicroBatches(tree, cfg, "tree", 1);
    expect(split.map((m) => m.samples)).toEqual([[0], [1], [2], [3]]);
    const pairs = planMicroBatches(tree, cfg, "flat", Math.max(...planMicroBatches(tree, cfg, "flat", 1).map((m) => m.bytes)) * 2.2);
    expect(pairs.length).toBeGreaterThan(1);
    expect(pairs.length).toBeLessThan(4);
    expect(pairs.flatMap((m) => m.samples)).toEqual([0, 1, 2, 3]);
    expect(() => planMicroBatches(tree, cfg, "tree", 0)).toThrow(/maxStepBytes must be > 0/);
  });

  it("counts the entropy's [terms, vocab] tensors when the pass computes it: 2 of them per term, ×3 as the rest", () => {
    const terms = (m: { samples: number[] }): number => tree.terms.sample.filter((s) => m.samples.includes(s)).length;
    for (const layout of ["tree", "flat"] as const) {
      const plain = planMicroBatches(tree, cfg, layout, 1);
      const withEntropy = planMicroBatches(tree, cfg, layout, 1, { entropy: true });
      expect(withEntropy.map((m) => m.samples)).toEqual(plain.map((m) => m.samples));
      withEntropy.forEach((m, i) => expect(m.bytes - (plain[i]?.bytes ?? 0)).toBe(3 * 4 * 2 * cfg.nVocab * terms(m)));
    }
    // A budget the whole batch fits in one pass without the entropy, and not with it.
    const whole = planMicroBatches(tree, cfg, "flat", 1 << 30)[0]!.bytes;
    expect(planMicroBatches(tree, cfg, "flat", whole)).toHaveLength(1);
    expect(planMicroBatches(tree, cfg, "flat", whole, { entropy: true }).length).toBeGreaterThan(1);
  });

  it("the trainer's split step equals the unsplit one: loss, gradients, logprobs, clip fraction", async () => {
    const batches: TrainBatch[] = [
      { tree, loss: "sft" },
      { tree, termUnit: tree.terms.sample, loss: { ratio: "sequence", objective: "clip", epsLow: 0.2, epsHigh: 0.28, normaliser: "sample-mean" } },
      { tree, loss: { ratio: "token", objective: "cispo", epsLow: 0.2, epsHigh: 0.28, normaliser: "token-mean" } },
    ];
    for (const layout of ["tree", "flat"] as const) {
      const whole = await Trainer.create(cfg, initWeights(cfg, new Rng(3)), { layout });
      const split = await Trainer.create(cfg, initWeights(cfg, new Rng(3)), { layout, maxStepBytes: 1 });
      try {
        for (const b of batches) {
          const gw = whole.gradients(b);
          const gs = split.gradients(b);
          expect(gs.loss).toBeCloseTo(gw.loss, 5);
          for (let j = 0; j < gw.logprobs.length; j++) expect(gs.logprobs[j]).toBeCloseTo(gw.logprobs[j] as number, 5);
          for (const [name, g] of gw.grads) {
            const h = gs.grads.get(name) as Float32Array;
            for (let i = 0; i < g.length; i++) expect(h[i], `${layout} ${name}[${i}]`).toBeCloseTo(g[i] as number, 5);
          }
          const rw = whole.step(b);
          const rs = split.step(b);
          expect(rw.microBatches).toBe(1);
          expect(rs.microBatches).toBe(4);
          expect(rs.loss).toBeCloseTo(rw.loss, 5);
          expect(rs.gradNorm).toBeCloseTo(rw.gradNorm, 5);
          expect(rs.clipFraction).toBe(rw.clipFraction);
          // Split passes rerun the shared prefixes.
          expect(rs.tokens).toBeGreaterThanOrEqual(rw.tokens);
        }
        const a = whole.logprobs(tree);
        const c = split.logprobs(tree);
        for (let j = 0; j < a.length; j++) expect(c[j]).toBeCloseTo(a[j] as number, 4);
      } finally {
        whole.dispose();
        split.dispose();
      }
    }
  });
});

describe("checkContext", () => {
  it("names the sample, its length and the model's context", async () => {
    const long = Array.from({ length: 70 }, (_, i) => 1 + (i % 20));
    const { tree } = buildPackedTree([sample([1, 2, 3, 4], 1, 0.5), sample(long, -1, 0.01)]);
    expect(() => checkContext(tree, 64, ["p0#s0", "p1#s0"])).toThrow("trainer: sample 1 (p1#s0) has 70 tokens, more than the model's context of 64 tokens (contextLength)");
    expect(() => checkContext(tree, 70)).not.toThrow();
    const tr = await Trainer.create(cfg, initWeights(cfg, new Rng(1)));
    try {
      expect(() => tr.step({ tree, loss: "sft", sampleIds: ["a", "b"] })).toThrow(/sample 1 \(b\) has 70 tokens, more than the model's context of 64/);
      expect(() => tr.logprobs(tree)).toThrow(/sample 1 has 70 tokens/);
      expect(tr.version).toBe(0);
    } finally {
      tr.dispose();
    }
  });
});
