// The reference trainer's Adam state survives a save and load: a trainer rebuilt from the weights and the
// optimizer state of another takes exactly the step the other takes next (what `arbor run --resume` needs).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { buildPackedTree, type TreeSampleInput } from "../batch/tree/build-tree.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { writeSafetensors } from "../model/safetensors.js";
import { initWeights, type Tensor } from "../model/weights.js";
import { Trainer, type TrainBatch } from "./trainer.js";

const root = mkdtempSync(join(tmpdir(), "arbor-optim-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const cfg = tinyConfig({ nVocab: 24, nEmbd: 16, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 32, contextLength: 256 });

function sample(tokens: number[], advantage: number): TreeSampleInput {
  return {
    tokenIds: tokens,
    lossMask: tokens.map((_, i) => (i >= 2 ? 1 : 0)),
    advantages: tokens.map(() => advantage),
    oldLogprobs: tokens.map(() => -Math.log(cfg.nVocab)),
    weights: tokens.map((_, i) => (i >= 2 ? 1 / 6 : 0)),
  };
}

function grpoBatch(a: number[], b: number[]): TrainBatch {
  const { tree } = buildPackedTree([sample(a, 1), sample(b, -1)]);
  return { tree, termUnit: tree.terms.sample, loss: { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean" } };
}

function maxDiff(a: readonly Tensor[], b: readonly Tensor[]): number {
  let d = 0;
  a.forEach((t, i) => t.data.forEach((x, j) => (d = Math.max(d, Math.abs(x - (b[i]?.data[j] as number))))));
  return d;
}

const first = grpoBatch([1, 2, 3, 4, 5], [1, 2, 9, 10, 11]);
const second = grpoBatch([1, 2, 6, 7, 8], [1, 2, 12, 13, 3]);

it("restored Adam moments and step count: the next step equals the uninterrupted trainer's within 1e-6", async () => {
  const a = await Trainer.create(cfg, initWeights(cfg, new Rng(5)), { lr: 1e-2 });
  let saved: Tensor[];
  const statePath = join(root, "adam.safetensors");
  let uninterrupted: Tensor[];
  try {
    a.step(first);
    a.step(second);
    saved = a.model.toTensors();
    await a.saveOptimizerState(statePath);
    a.step(first);
    uninterrupted = a.model.toTensors();
  } finally {
    a.dispose();
  }

  const b = await Trainer.create(cfg, saved, { lr: 1e-2, version: 2 });
  try {
    await b.loadOptimizerState(statePath);
    expect(b.stepCount).toBe(2);
    const r = b.step(first);
    expect(r.version).toBe(3);
    expect(b.stepCount).toBe(3);
    expect(maxDiff(b.model.toTensors(), uninterrupted)).toBeLessThan(1e-6);
  } finally {
    b.dispose();
  }

  // Without the state the step is Adam's first (bias correction and moments from zero): clearly different.
  const c = await Trainer.create(cfg, saved, { lr: 1e-2, version: 2 });
  try {
    c.step(first);
    expect(maxDiff(c.model.toTensors(), uninterrupted)).toBeGreaterThan(1e-4);
  } finally {
    c.dispose();
  }
});

it("a file that is not an optimizer state, or whose moments do not fit the model, is refused naming why", async () => {
  const tr = await Trainer.create(cfg, initWeights(cfg, new Rng(5)), { lr: 1e-2 });
  try {
    const plain = join(root, "plain.safetensors");
    writeSafetensors(plain, [{ name: "x", shape: [1], data: new Float32Array(1) }]);
    await expect(tr.loadOptimizerState(plain)).rejects.toThrow(/not an Arbor optimizer state/);
    const name = tr.model.toTensors()[0]!.name;
    const wrong = join(root, "wrong.safetensors");
    const bad = { shape: [2], data: new Float32Array(2) };
    writeSafetensors(wrong, [{ name: `m/${name}`, ...bad }, { name: `v/${name}`, ...bad }], { format: "arbor-adam-1", iterations: "1", trainerSteps: "1" });
    await expect(tr.loadOptimizerState(wrong)).rejects.toThrow(new RegExp(`moment m/${name.replace(/\./g, "\\.")} has shape \\[2\\]`));
  } finally {
    tr.dispose();
  }
});
