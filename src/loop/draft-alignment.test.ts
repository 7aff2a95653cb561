// The draft kept aligned during RL: each refresh distils it from the trainer's policy on the batch's
// sequences and writes draft-vN.gguf beside policy-vN.gguf; drafts of versions no longer kept go with them.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { configFromGguf, readGguf } from "../model/gguf.js";
import { Trainer } from "../trainer/trainer.js";
import { buildTrainingBatch } from "../batch/build-batch.js";
import { oneCallGroup, oneCallTrajectory } from "../testing/one-call-trajectory.js";
import { DraftAlignment } from "./draft-alignment.js";
import { referenceTrainer } from "./reference-trainer.js";

const root = mkdtempSync(join(tmpdir(), "arbor-draft-align-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const model = join(import.meta.dirname, "../../models/calc-sft.gguf");
const clock = new VirtualClock(0);

it("writes each version's distilled draft beside its checkpoint and removes drafts of dropped versions", async () => {
  const dir = join(root, "checkpoints");
  const rng = new Rng(5);
  const seqs = Array.from({ length: 6 }, () => Array.from({ length: 20 }, () => rng.int(0, 360)));
  let alignment: DraftAlignment | undefined;
  try {
    for (const version of [1, 2, 3]) {
      const tf = await Trainer.fromGguf(model, { version, clock });
      try {
        alignment ??= await DraftAlignment.start(tf, { layers: 1, steps: 4, batch: 4, lr: 1e-4, topK: 8 }, 1);
        const { path } = tf.checkpoint(dir, 2);
        const r = alignment.refresh(tf, seqs, path);
        expect(r.path).toBe(join(dir, `draft-v${version}.gguf`));
        if (version === 1) expect(r.lossAfter).toBeLessThan(r.lossBefore);
        const f = readGguf(r.path);
        expect(f.metadata.get("arbor.policy_version")).toBe(version);
        expect(configFromGguf(f.metadata, r.path).nLayer).toBe(1);
      } finally {
        tf.dispose();
      }
    }
  } finally {
    alignment?.dispose();
  }
  // keep 2: versions 2 and 3 remain, with their drafts.
  expect(existsSync(join(dir, "draft-v1.gguf"))).toBe(false);
  expect(existsSync(join(dir, "draft-v2.gguf"))).toBe(true);
  expect(existsSync(join(dir, "draft-v3.gguf"))).toBe(true);
});

it("refuses options the policy cannot have, naming the field", async () => {
  const tf = await Trainer.fromGguf(model, { clock });
  try {
    await expect(DraftAlignment.start(tf, { layers: 5, steps: 1, batch: 1, lr: 1e-4, topK: 8 })).rejects.toThrow(/draftModel\.layers: must be an integer in 1\.\.2, got 5/);
  } finally {
    tf.dispose();
  }
});

it("the reference trainer refreshes the draft after each step, before the loop's weight sync", async () => {
  const dir = join(root, "run");
  const tf = await Trainer.fromGguf(model, { clock });
  const draft = await DraftAlignment.start(tf, { layers: 1, steps: 2, batch: 2, lr: 1e-4, topK: 8 });
  const trainer = referenceTrainer(tf, { checkpointDir: dir }, draft);
  try {
    const trajectories = [oneCallTrajectory("g", 0, [50, 51, 2], 1), oneCallTrajectory("g", 1, [52, 53, 2], 0)];
    const built = buildTrainingBatch({ id: "x", trajectories, groups: [oneCallGroup("g", 2)], estimator: "grpo", mode: "merged" });
    const u = await trainer.step(built);
    expect(u).toMatchObject({ stepped: true, version: 1 });
    expect(readGguf(join(dir, "draft-v1.gguf")).metadata.get("arbor.policy_version")).toBe(1);
  } finally {
    await trainer.close();
  }
});
