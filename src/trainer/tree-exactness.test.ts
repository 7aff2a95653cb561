// Issue 7's exactness property: training on the prefix tree gives the same loss and the same gradient
// for every parameter as training on each sample separately, on random agentic batches.
//
// "Same" is measured per parameter as max_i |g_tree[i] − g_sep[i]| / max_i |g_sep[i]| ≤ 1e-5. Both sides
// run in float32 and sum the same contributions in different orders (a shared prefix's gradient is one
// row in the tree, several rows summed in the separate run), so each element differs by a few ulps of
// the *magnitudes summed*; an element that is a near-cancelling sum (true value ≈ 0) then has an
// unbounded element-wise relative error while being exact to float32 precision. Scaling by the
// parameter's largest gradient is the float32-meaningful form of "max relative difference"; a genuine
// layout bug (a wrong position id, mask or fork term) moves gradients by O(1) of that scale (checked
// below with a deliberately wrong tree).
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTrainingBatch } from "../batch/build-batch.js";
import { buildPackedTree } from "../batch/tree/build-tree.js";
import { syntheticSweBatch } from "../batch/tree/synthetic.js";
import type { PackedTree } from "../batch/tree/packed-tree.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { initWeights } from "../model/weights.js";
import { batchSpecArb, specBatch } from "../testing/test-batches.js";
import type { Layout } from "./layouts.js";
import { Trainer, type TrainBatch } from "./trainer.js";

const TOL = 1e-5;

/** Weights far from init (larger matrices, uneven norms) so attention and RoPE matter to every logit. */
async function trainer(nLayer: number, seed: number): Promise<Trainer> {
  const cfg = tinyConfig({ nVocab: 16, nEmbd: 16, nLayer, nHead: 4, nHeadKv: 2, nFf: 32, contextLength: 256 });
  const rng = new Rng(seed);
  const tensors = initWeights(cfg, new Rng(seed + 1)).map((t) => ({
    ...t,
    data: t.data.map((x) => (t.name.includes("norm") ? 1 + 0.2 * rng.normal() : x * 15)),
  }));
  return Trainer.create(cfg, tensors);
}

/** Worst per-parameter scaled gradient difference and relative loss difference between the layouts. */
function compare(tr: Trainer, batch: TrainBatch, other: TrainBatch = batch, layout: Layout = "tree"): { grad: number; loss: number; worstParam: string } {
  const tree = tr.gradients(batch, layout);
  const sep = tr.gradients(other, "flat");
  let grad = 0;
  let worstParam = "";
  expect([...tree.grads.keys()].sort()).toEqual([...sep.grads.keys()].sort());
  for (const [name, g] of tree.grads) {
    const h = sep.grads.get(name) as Float32Array;
    let diff = 0;
    let scale = 0;
    for (let i = 0; i < g.length; i++) {
      diff = Math.max(diff, Math.abs((g[i] as number) - (h[i] as number)));
      scale = Math.max(scale, Math.abs(h[i] as number));
    }
    const rel = scale === 0 ? diff : diff / scale;
    if (rel > grad) [grad, worstParam] = [rel, name];
  }
  return { grad, loss: Math.abs(tree.loss - sep.loss) / Math.max(Math.abs(sep.loss), 1e-12), worstParam };
}

describe("tree-merged vs separate training (issue 7 exactness)", () => {
  const trainers: Trainer[] = [];
  beforeAll(async () => {
    trainers.push(await trainer(1, 11), await trainer(2, 21));
  });
  afterAll(() => trainers.forEach((t) => t.dispose()));

  it("gives the same loss and gradients for every parameter on random multi-call batches (1 and 2 layers, chain-wise and dense tree attention)", () => {
    let checked = 0;
    let merged = 0;
    for (const tr of trainers) {
      fc.assert(
        fc.property(batchSpecArb(8), (spec) => {
          const batch = specBatch(spec);
          if (!batch) return;
          checked++;
          if (batch.stats.treeTokens < batch.stats.flatTokens) merged++;
          for (const layout of ["tree", "tree-dense"] as const) {
            const r = compare(tr, batch, batch, layout);
            expect(r.loss, `${layout} loss (${spec.estimator}, ${spec.mode})`).toBeLessThanOrEqual(TOL);
            expect(r.grad, `${layout} gradient of ${r.worstParam} (${spec.estimator}, ${spec.mode})`).toBeLessThanOrEqual(TOL);
          }
        }),
        { numRuns: 20, seed: 7 },
      );
    }
    // The property only means something if the batches really share prefixes.
    expect(checked).toBeGreaterThan(32);
    expect(merged).toBeGreaterThan(checked * 0.8);
  }, 60_000);

  it("is exact with a fork at every depth of one sequence, and fork nodes carry every branch's term", () => {
    const base = [1, 2, 3, 4, 5, 6, 7];
    const samples = base.map((_, d) => {
      const tokens = base.slice(0, d + 1).concat([8 + (d % 7), 9]);
      return {
        tokenIds: tokens,
        lossMask: tokens.map((_, i) => (i === 0 ? 0 : 1)),
        advantages: tokens.map(() => (d % 2 === 0 ? 1 : -0.5)),
        oldLogprobs: tokens.map((_, i) => -2.5 - i / 20),
        weights: tokens.map(() => 1 / 50),
      };
    });
    const { tree } = buildPackedTree(samples);
    // Every node of the base is a fork: each predicts the base continuation and a branch.
    const termsAt = new Map<number, Set<number>>();
    for (let j = 0; j < tree.terms.node.length; j++) {
      const n = tree.terms.node[j] as number;
      termsAt.set(n, (termsAt.get(n) ?? new Set()).add(tree.terms.target[j] as number));
    }
    expect([...termsAt.values()].filter((s) => s.size >= 2).length).toBeGreaterThanOrEqual(base.length - 1);
    for (const tr of trainers) {
      for (const ratio of ["token", "sequence"] as const) {
        const batch: TrainBatch = { tree, termUnit: tree.terms.sample, loss: { ratio, objective: "clip", epsLow: 0.2, epsHigh: 0.28, normaliser: "token-mean" } };
        for (const layout of ["tree", "tree-dense"] as const) {
          const r = compare(tr, batch, batch, layout);
          expect(r.loss).toBeLessThanOrEqual(TOL);
          expect(r.grad).toBeLessThanOrEqual(TOL);
        }
      }
    }
  });

  it("detects a wrong tree: position ids = node index instead of depth move gradients far beyond the tolerance", () => {
    const batch = fc.sample(batchSpecArb(8), { numRuns: 30, seed: 3 })
      .map(specBatch)
      .find((b) => b !== undefined && b.stats.treeTokens < b.stats.flatTokens - 4) as TrainBatch;
    const broken: PackedTree = { ...batch.tree, positions: Int32Array.from(batch.tree.positions, (_, i) => i) };
    const r = compare(trainers[1] as Trainer, { ...batch, tree: broken }, batch);
    expect(r.grad).toBeGreaterThan(1e-2);
  });

  it("is exact on a SWE-agent-shaped batch: a group of 16, 20-24 calls per trajectory, per-call samples, shared first turns", async () => {
    // Issue 18's shape, with turn lengths of a few tokens so the flat side (one pass per call) stays small.
    const syn = syntheticSweBatch({ seed: 5, tasks: 1, groupSize: 16, turns: [20, 24], systemTokens: 3, taskTokens: [1, 2], outputTokens: [1, 2], toolTokens: [1, 1], coincideProbability: 0.5, vocab: 40 });
    const batch = buildTrainingBatch({ id: "swe", trajectories: syn.trajectories, groups: syn.groups, estimator: "grpo", mode: "per-call" }).tree;
    expect(batch.stats.samples).toBeGreaterThanOrEqual(16 * 20);
    expect(batch.stats.treeTokenRatio).toBeGreaterThan(8);
    const cfg = tinyConfig({ nVocab: 40, nEmbd: 16, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 32, contextLength: 256 });
    const tr = await Trainer.create(cfg, initWeights(cfg, new Rng(8)).map((t) => ({ ...t, data: t.data.map((x) => (t.name.includes("norm") ? 1 : x * 15)) })));
    try {
      const r = compare(tr, batch);
      expect(r.loss).toBeLessThanOrEqual(TOL);
      expect(r.grad, `gradient of ${r.worstParam}`).toBeLessThanOrEqual(TOL);
    } finally {
      tr.dispose();
    }
  }, 120_000);
});
