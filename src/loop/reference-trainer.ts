// The in-process reference trainer (src/trainer/, tfjs) behind the loop's Trainer port: each step is one
// rlUpdate on the batch the loop built, and each published version is a GGUF checkpoint in `checkpointDir`
// with the optimizer state beside it (`policy-v{N}.adam.safetensors`), so a killed run can resume. With
// `draftModel` (config `train.draftModel`), each step also distils the draft model from the new policy on
// the batch's sequences and writes `draft-v{N}.gguf` beside the checkpoint (draft-alignment.ts).
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { optimizerFileName, removeCheckpointsAfter } from "../trainer/checkpoint.js";
import type { Trainer as TfTrainer } from "../trainer/trainer.js";
import type { DraftModelOptions } from "../trainer/draft-distiller.js";
import { DraftAlignment } from "./draft-alignment.js";
import { rlUpdate, type RlUpdateOptions } from "./rl-update.js";
import type { Trainer } from "./trainer-port.js";

/** Options of {@link startReferenceTrainer}. */
export interface ReferenceTrainerOptions extends RlUpdateOptions {
  lr: number;
  maxGradNorm: number;
  /** Learning-rate multipliers per parameter (config `train.lrScale`). */
  lrScale?: Readonly<Record<string, number>>;
  clock: Clock;
  /** Continue a run (`arbor run --resume`) from the checkpoint of `version` and its optimizer state. */
  resume?: { version: number; checkpoint: string; optimizer?: string };
  /** Keep a draft model aligned with the policy (config `train.draftModel`); none when absent. */
  draftModel?: DraftModelOptions;
}

/**
 * Wrap a loaded tfjs trainer as the loop's Trainer; `close()` disposes it (and `draft`, refreshed after each
 * step that published a checkpoint, before the loop's weight sync loads it).
 */
export function referenceTrainer(tf: TfTrainer, o: RlUpdateOptions, draft?: DraftAlignment): Trainer {
  let closed = false;
  return {
    kind: "reference",
    get version() {
      return tf.version;
    },
    step: async (batch) => {
      const update = rlUpdate(tf, batch, o);
      if (update.stepped) await tf.saveOptimizerState(join(o.checkpointDir, optimizerFileName(update.version)));
      if (update.stepped && draft && update.checkpoint !== undefined) {
        draft.refresh(tf, batch.batch.samples.map((s) => ({ tokens: s.tokenIds, generated: s.lossMask })), update.checkpoint);
      }
      return update;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      draft?.dispose();
      tf.dispose();
    },
  };
}

/**
 * Load the policy GGUF at `modelPath` into the reference trainer at version 0. The checkpoint folder is
 * cleared first: versions restart at 1 in a new run, and the previous run's checkpoints would look newer.
 * With `resume`, the run's checkpoint of that version and its optimizer state are loaded instead, and only
 * what a killed run published after it (never recorded as done) is removed.
 */
export async function startReferenceTrainer(modelPath: string, o: ReferenceTrainerOptions): Promise<Trainer> {
  const r = o.resume;
  if (r === undefined || r.version === 0) rmSync(o.checkpointDir, { recursive: true, force: true });
  else {
    for (const path of [r.checkpoint, r.optimizer]) {
      if (path !== undefined && !existsSync(path)) throw new ArborError(`--resume: ${path} (policy version ${r.version}) is gone; train.keepCheckpoints may have removed it`, "config");
    }
    removeCheckpointsAfter(o.checkpointDir, r.version);
  }
  // tfjs loads only when a run trains.
  const { Trainer: Tf } = await import("../trainer/trainer.js");
  const resumed = r !== undefined && r.version > 0;
  const tf = await Tf.fromGguf(resumed ? r.checkpoint : modelPath, { lr: o.lr, maxGradNorm: o.maxGradNorm, version: resumed ? r.version : 0, clock: o.clock, ...(o.lrScale ? { lrScale: o.lrScale } : {}) });
  let draft: DraftAlignment | undefined;
  try {
    if (resumed && r.optimizer !== undefined) await tf.loadOptimizerState(r.optimizer);
    if (o.draftModel) draft = await DraftAlignment.start(tf, o.draftModel);
  } catch (err) {
    tf.dispose();
    throw err;
  }
  return referenceTrainer(tf, o, draft);
}
