import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { buildTrainingBatch } from "../batch/build-batch.js";
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { initWeights } from "../model/weights.js";
import { oneCallGroup as group, oneCallTrajectory as program } from "../testing/one-call-trajectory.js";
import { Trainer } from "../trainer/trainer.js";
import { rlUpdate } from "./rl-update.js";

const root = mkdtempSync(join(tmpdir(), "arbor-rl-update-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const cfg = tinyConfig({ nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 32, contextLength: 1024 });
let dir: string;
let n = 0;
beforeEach(() => {
  dir = join(root, `ckpt-${n++}`);
});

async function trainer(): Promise<Trainer> {
  return Trainer.create(cfg, initWeights(cfg, new Rng(2)), { lr: 1e-2, clock: new VirtualClock(0) });
}

describe("rlUpdate", () => {
  it("steps on the samples that carry an advantage, publishes v+1, and computes the same loss as the whole batch", async () => {
    const tr = await trainer();
    const ref = await trainer();
    try {
      const trajectories = [program("a", 0, [50, 51, 2], 1), program("a", 1, [52, 53, 2], 0), program("b", 0, [54, 2], 0), program("b", 1, [55, 2], 0)];
      const groups = [group("a", 2), group("b", 2)];
      const whole = buildTrainingBatch({ id: "x", trajectories, groups, mode: "merged" }).tree;
      const expected = ref.gradients({ tree: whole.tree, termUnit: whole.termUnit, loss: whole.loss }).loss;
      const u = rlUpdate(tr, buildTrainingBatch({ id: "x", trajectories, groups, estimator: "grpo", mode: "merged" }), { checkpointDir: dir });
      expect(u).toMatchObject({ stepped: true, version: 1, samples: 4, trainedSamples: 2, droppedGroups: 0 });
      expect(Math.abs(expected)).toBeGreaterThan(0.01);
      expect(u.loss).toBeCloseTo(expected, 6);
      expect(u.checkpoint).toBe(join(dir, "policy-v1.gguf"));
      expect(existsSync(u.checkpoint!)).toBe(true);
      // Both trained samples share the 6-token prompt: the tree runs it once.
      expect(u.flatTokens).toBe(9 + 9);
      expect(u.treeTokens).toBe(6 + 3 + 3);
      expect(tr.version).toBe(1);
    } finally {
      tr.dispose();
      ref.dispose();
    }
  });

  it("epochs: k optimizer steps at the scheduled rates, one published version, the ratio clipped in later epochs", async () => {
    const tr = await trainer();
    try {
      const trajectories = [program("a", 0, [50, 51, 2], 1), program("a", 1, [52, 53, 2], 0)];
      const built = buildTrainingBatch({ id: "x", trajectories, groups: [group("a", 2)], estimator: "grpo", mode: "merged" });
      const asked: number[] = [];
      const u = rlUpdate(tr, built, { checkpointDir: dir, epochs: 3, lrAt: (n) => (asked.push(n), 0.1 / n) });
      expect(asked).toEqual([1, 2, 3]);
      expect(u).toMatchObject({ stepped: true, version: 1, checkpoint: join(dir, "policy-v1.gguf") });
      expect(u.lr).toBeCloseTo(0.1 / 3, 12);
      expect(tr.stepCount).toBe(3);
      // Behaviour logprobs of −3 against a near-uniform policy (about −5.9): ratios far below 0.8, where the clip stops
      // the negative-advantage sample's gradient.
      expect(u.clipFraction).toBeGreaterThan(0);
      expect(existsSync(join(dir, "policy-v2.gguf"))).toBe(false);
    } finally {
      tr.dispose();
    }
  });

  it("takes no step and publishes nothing when every group's rewards are equal", async () => {
    const tr = await trainer();
    try {
      const trajectories = [program("a", 0, [50, 2], 1), program("a", 1, [51, 2], 1)];
      const u = rlUpdate(tr, buildTrainingBatch({ id: "y", trajectories, groups: [group("a", 2)], estimator: "grpo", mode: "merged" }), { checkpointDir: dir });
      expect(u).toMatchObject({ stepped: false, version: 0, samples: 2, trainedSamples: 0 });
      expect(u.checkpoint).toBeUndefined();
      expect(existsSync(dir)).toBe(false);
      expect(tr.stepCount).toBe(0);
    } finally {
      tr.dispose();
    }
  });
});
