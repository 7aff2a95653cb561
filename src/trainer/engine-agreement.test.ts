// Trainer vs engine on the same tokens: the trainer writes its weights as a GGUF checkpoint, llama.cpp
// (node-llama-cpp, F32 KV cache, no flash attention) scores the same sequences, and the logprobs agree.
//
// Bound: |Δ log π| ≤ 1e-4 and |Δ π| ≤ 2e-5 at every position. Both sides compute in float32 with different
// summation orders (XNNPACK vs ggml kernels), so logits differ by a few ulp of the values summed; with
// weights scaled far from init (logits up to ~±20, peaked distributions) we measured max |Δ log π| ≈ 3e-5
// and max |Δ π| ≈ 8e-6 (docs/references.md §L: 1.3e-5 for a plain JS pass) — the bound leaves ~3× headroom, while a
// real disagreement (wrong RoPE, GQA head mapping, norm) is ≥ 1e-2, as the control below shows.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildPackedTree } from "../batch/tree/build-tree.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { Vocab } from "../model/vocab.js";
import { initWeights } from "../model/weights.js";
import { engineAgreement } from "../testing/engine-agreement.js";
import { TinyLlama } from "./tiny-llama.js";
import { Trainer } from "./trainer.js";

const vocab = new Vocab();
const dir = mkdtempSync(join(tmpdir(), "arbor-agree-"));
const cfg = tinyConfig({ nVocab: vocab.size, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 1024 });
const rng = new Rng(7);
const tensors = initWeights(cfg, new Rng(3)).map((t) => ({ ...t, data: t.data.map((x) => (t.name.includes("norm") ? 1 + 0.3 * rng.normal() : x * 25)) }));
const sequences = [60, 120, 17].map((n) => [vocab.bosId, ...Array.from({ length: n }, () => rng.int(3, vocab.size - 1))]);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("trainer/engine logprob agreement", () => {
  it("matches llama.cpp on the checkpoint it wrote, before and after training steps", async () => {
    const tr = await Trainer.create(cfg, tensors, { lr: 3e-3 });
    try {
      const v0 = tr.checkpoint(dir);
      const before = await engineAgreement(tr.model, v0.path, sequences);
      expect(before.positions).toBe(60 + 120 + 17);
      expect(before.maxAbsLogprobDiff).toBeLessThanOrEqual(1e-4);
      expect(before.meanAbsLogprobDiff).toBeLessThanOrEqual(1e-5);
      expect(before.maxAbsProbDiff).toBeLessThanOrEqual(2e-5);

      // SFT steps on one sequence change the weights; the new version must still agree.
      const s = sequences[2] as number[];
      const { tree } = buildPackedTree([{ tokenIds: s, lossMask: s.map((_, i) => (i ? 1 : 0)), advantages: s.map(() => 0), oldLogprobs: s.map(() => 0), weights: s.map(() => 1 / s.length) }]);
      for (let i = 0; i < 3; i++) tr.step({ tree, loss: "sft" });
      const v3 = tr.checkpoint(dir);
      expect(v3.manifest.version).toBe(3);
      const after = await engineAgreement(tr.model, v3.path, sequences);
      expect(after.maxAbsLogprobDiff).toBeLessThanOrEqual(1e-4);
      expect(after.maxAbsProbDiff).toBeLessThanOrEqual(2e-5);
      // The check compared the trained weights, not the old file: v0 no longer agrees with them.
      const stale = await engineAgreement(tr.model, v0.path, sequences);
      expect(stale.maxAbsLogprobDiff).toBeGreaterThan(1e-3);
    } finally {
      tr.dispose();
    }
  }, 60_000);

  it("reports a large mismatch for a trainer whose RoPE differs from the engine's (the check can fail)", async () => {
    const tr = await Trainer.create(cfg, tensors);
    const wrong = new TinyLlama({ ...cfg, ropeFreqBase: 500 }, tensors);
    try {
      const { path } = tr.checkpoint(join(dir, "control"));
      const stats = await engineAgreement(wrong, path, sequences);
      expect(stats.maxAbsLogprobDiff).toBeGreaterThan(1e-2);
    } finally {
      wrong.dispose();
      tr.dispose();
    }
  }, 60_000);
});
