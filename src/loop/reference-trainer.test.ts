// The reference trainer resumed (`arbor run --resume`): it starts from the recorded checkpoint and optimizer
// state, and removes only what a killed run published after it; a checkpoint that is gone is refused.
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { checkpointFileName, optimizerFileName, readManifest } from "../trainer/checkpoint.js";
import { Trainer } from "../trainer/trainer.js";
import { startReferenceTrainer } from "./reference-trainer.js";

const root = mkdtempSync(join(tmpdir(), "arbor-ref-trainer-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const model = join(import.meta.dirname, "../../models/calc-sft.gguf");
const clock = new VirtualClock(0);

it("resumes at the recorded version, removing checkpoints a killed run published after it", async () => {
  const dir = join(root, "checkpoints");
  // Versions 1 and 2 published with their optimizer states; the run recorded only version 1 as done.
  for (const version of [1, 2]) {
    const tf = await Trainer.fromGguf(model, { version, clock });
    try {
      tf.checkpoint(dir);
      await tf.saveOptimizerState(join(dir, optimizerFileName(version)));
    } finally {
      tf.dispose();
    }
  }
  expect(readManifest(dir)?.version).toBe(2);
  const trainer = await startReferenceTrainer(model, {
    lr: 1e-3,
    maxGradNorm: 1,
    clock,
    checkpointDir: dir,
    resume: { version: 1, checkpoint: join(dir, checkpointFileName(1)), optimizer: join(dir, optimizerFileName(1)) },
  });
  try {
    expect(trainer.version).toBe(1);
    expect(readdirSync(dir).sort()).toEqual([optimizerFileName(1), checkpointFileName(1)].sort());
    expect(readManifest(dir)).toBeUndefined();
  } finally {
    await trainer.close();
  }
  // A fresh run clears the folder: its versions start again at 1.
  const fresh = await startReferenceTrainer(model, { lr: 1e-3, maxGradNorm: 1, clock, checkpointDir: dir });
  await fresh.close();
  expect(fresh.version).toBe(0);
  expect(existsSync(dir)).toBe(false);
});

it("refuses to resume from a checkpoint that is gone, naming it", async () => {
  const gone = join(root, "none", checkpointFileName(3));
  await expect(startReferenceTrainer(model, { lr: 1e-3, maxGradNorm: 1, clock, checkpointDir: join(root, "none"), resume: { version: 3, checkpoint: gone } })).rejects.toThrow(
    `--resume: ${gone} (policy version 3) is gone`,
  );
});
