// What is exported is what is trained: for every step of the training loop, the batch file (JSONL) read back
// equals, sample by sample and field by field, the batch the Trainer port stepped on, and the prefix tree the
// reference trainer's optimizer step ran is the one built from exactly those samples (those with signal). The
// rollout is scripted (two steps of multi-call programs); batch builder, export, trainer and checkpoint are real.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { ScoredSample } from "../batch/batch-sample.js";
import type { BuiltBatch } from "../batch/build-batch.js";
import { readSamplesJsonl } from "../batch/export-jsonl.js";
import { buildTreeBatch, type TreeBatch } from "../batch/tree/tree-batch.js";
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { initWeights } from "../model/weights.js";
import type { TakenBatch } from "../rollout/async-rollout.js";
import { specTrajectories } from "../testing/test-batches.js";
import { Trainer as TfTrainer } from "../trainer/trainer.js";
import { jsonlBatchExporter } from "./export-batch.js";
import { referenceTrainer } from "./reference-trainer.js";
import { samplesWithSignal } from "./rl-update.js";
import { runTrainLoop, type RolloutSource } from "./train-loop.js";
import type { Trainer } from "./trainer-port.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-exported-batch-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cfg = tinyConfig({ nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 32, contextLength: 256 });

/** Step `step`'s rollout: two groups of multi-call programs (tool output between calls) with unequal rewards in group 0. */
function taken(step: number, version: number): TakenBatch {
  const call = (output: number[], lp: number) => ({ output, tool: [40 + step], logprobs: output.map((_, i) => lp - i / 7) });
  const program = (p: number, reward: number) => ({ forkFrom: 0, forkDepth: p, calls: [call([50 + p, 60, 61], -2.5), call([70 + p, 2], -3)], reward });
  const { trajectories, groups } = specTrajectories({
    prompts: [
      [1, 30, 31, 32],
      [1, 33, 34],
    ],
    groups: [
      [program(0, 1), program(1, 0), program(2, 0.5)],
      [program(3, 2), program(4, 2)],
    ],
    estimator: "dr-grpo",
    mode: "merged",
  });
  return { id: `it${step}`, batch: { index: step - 1, version, groups: [], tokens: 0, meanStaleness: 0, maxStaleness: 0 }, groups, trajectories };
}

const FIELDS: (keyof ScoredSample)[] = ["id", "programId", "groupId", "taskId", "callIds", "segment", "tokenIds", "lossMask", "oldLogprobs", "versions", "chunks", "advantages", "weights"];
const bits = (xs: readonly number[]): string => Buffer.from(new Float64Array(xs).buffer).toString("hex");

describe("the exported batch of an iteration", () => {
  it("equals, field by field, the batch the trainer stepped on, and the trained tree is built from exactly its samples", async () => {
    const tf = await TfTrainer.create(cfg, initWeights(cfg, new Rng(3)), { lr: 1e-2, clock: new VirtualClock(0) });
    const trees: TreeBatch[] = [];
    const reference = referenceTrainer(tf, { checkpointDir: join(dir, "ckpt"), onTree: (t) => trees.push(t) });
    // What the Trainer port was given, step by step.
    const given: BuiltBatch[] = [];
    const trainer: Trainer = {
      kind: reference.kind,
      get version() {
        return reference.version;
      },
      step: (b) => {
        given.push(b);
        return reference.step(b);
      },
      close: () => reference.close(),
    };
    const queue = [taken(1, 0)];
    const loaded: [string, number][] = [];
    const published: number[] = [];
    // Evaluation runs after the weight sync: it sees the version every engine was told to load.
    const evaluated: [number, number, number][] = [];
    const rollout: RolloutSource = {
      next: async () => queue.shift(),
      beginSync: () => true,
      published: (v) => {
        published.push(v);
        if (v === 1) queue.push(taken(2, 1));
      },
      skipped: () => {},
      finish: async (why) => ({ stoppedBy: why, results: [], unconsumedGroups: [], finalVersion: reference.version, invertedTokens: 0, unreportedTokens: 0 }),
    };
    try {
      const out = await runTrainLoop({
        rollout,
        steps: 2,
        estimator: "dr-grpo",
        trainer,
        weights: { load: async (path, v) => void loaded.push([path, v]) },
        exportBatch: jsonlBatchExporter(join(dir, "out"), (k) => `batch-it${k}.jsonl`),
        // A score returned (here for every version but 1) goes into the step's record, the start's into the result.
        // Each step is recorded as trained (its weights served, no held-out score yet) before its evaluation.
        onTrained: (r) => void evaluated.push([r.iteration, r.update?.version ?? -1, r.heldOut === undefined ? loaded.length : -1]),
        evaluate: async (step, version) => {
          evaluated.push([step, version, loaded.length]);
          return version === 1 ? undefined : { version, solved: { mean: version / 10, se: 0, n: 1 }, baseVersion: 0, tasks: 1, samples: 1, temperature: 1 };
        },
        clock: new VirtualClock(0),
      });
      // The starting policy first (step 0, nothing loaded yet), then after each step's sync.
      expect(evaluated).toEqual([
        [0, 0, 0],
        [1, 1, 1],
        [1, 1, 1],
        [2, 2, 2],
        [2, 2, 2],
      ]);
      expect(out.iterations.map((r) => r.update?.stepped)).toEqual([true, true]);
      expect(out.heldOutStart?.version).toBe(0);
      expect(out.iterations.map((r) => r.heldOut?.solved.mean)).toEqual([undefined, 0.2]);
      expect(given).toHaveLength(2);
      expect(trees).toHaveLength(2);
      expect(published).toEqual([1, 2]);
      expect(loaded).toEqual([
        [join(dir, "ckpt", "policy-v1.gguf"), 1],
        [join(dir, "ckpt", "policy-v2.gguf"), 2],
      ]);
      for (const [k, r] of out.iterations.entries()) {
        const stepped = given[k]!;
        expect(r.batchPath).toBe(join(dir, "out", `batch-it${k + 1}.jsonl`));
        const exported = await readSamplesJsonl(r.batchPath);
        // The batch builder's samples: merged multi-call programs (one sample each), the configured estimator.
        expect(stepped.batch.id).toBe(`it${k + 1}`);
        expect(exported).toHaveLength(5);
        expect(exported.map((s) => s.callIds.length)).toEqual([2, 2, 2, 2, 2]);
        expect(r.samples).toBe(exported.length);
        expect(exported.length).toBe(stepped.batch.samples.length);
        exported.forEach((s, i) => {
          const t = stepped.batch.samples[i]!;
          for (const f of FIELDS) expect(s[f], `step ${k + 1}, sample ${i}, ${f}`).toEqual(t[f]);
          // Floats bit for bit: JSON must not round a logprob, an advantage or a weight.
          for (const f of ["oldLogprobs", "advantages", "weights"] as const) expect(bits(s[f]), `${f}`).toBe(bits(t[f]));
        });
        // Dr.GRPO's advantage r − mean(r) (no std normalisation): group 0's rewards 1, 0, 0.5 → 0.5, −0.5, 0.
        const adv = exported.map((s) => s.advantages.find((_, i) => s.lossMask[i] === 1));
        expect(adv).toEqual([0.5, -0.5, 0, 0, 0]);
        // The tree of the optimizer step: exactly the exported samples that carry a signal, with the batch's loss.
        const expected = buildTreeBatch(samplesWithSignal(exported), stepped.batch.loss);
        const ran = trees[k]!;
        expect(ran.stats.flatTokens).toBe(samplesWithSignal(exported).reduce((n, s) => n + s.tokenIds.length, 0));
        expect(ran.tree.tokens).toEqual(expected.tree.tokens);
        expect(ran.tree.parents).toEqual(expected.tree.parents);
        expect(ran.tree.positions).toEqual(expected.tree.positions);
        expect(ran.tree.samplePaths).toEqual(expected.tree.samplePaths);
        expect(ran.tree.terms).toEqual(expected.tree.terms);
        expect(ran.termUnit).toEqual(expected.termUnit);
        expect(ran.loss).toEqual(expected.loss);
      }
    } finally {
      await trainer.close();
    }
  }, 60_000);
});
