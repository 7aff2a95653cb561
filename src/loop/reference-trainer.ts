// The in-process reference trainer (src/trainer/, tfjs) behind the loop's Trainer port: each step is one
// rlUpdate on the batch the loop built, and each published version is a GGUF checkpoint in `checkpointDir`.
import { rmSync } from "node:fs";
import type { Clock } from "../core/clock.js";
import type { Trainer as TfTrainer } from "../trainer/trainer.js";
import { rlUpdate, type RlUpdateOptions } from "./rl-update.js";
import type { Trainer } from "./trainer-port.js";

/** Options of {@link startReferenceTrainer}. */
export interface ReferenceTrainerOptions extends RlUpdateOptions {
  lr: number;
  maxGradNorm: number;
  clock: Clock;
}

/** Wrap a loaded tfjs trainer as the loop's Trainer; `close()` disposes it. */
export function referenceTrainer(tf: TfTrainer, o: RlUpdateOptions): Trainer {
  let closed = false;
  return {
    kind: "reference",
    get version() {
      return tf.version;
    },
    step: async (batch) => rlUpdate(tf, batch, o),
    close: async () => {
      if (closed) return;
      closed = true;
      tf.dispose();
    },
  };
}

/**
 * Load the policy GGUF at `modelPath` into the reference trainer at version 0. The checkpoint folder is
 * cleared first: versions restart at 1 in a new run, and the previous run's checkpoints would look newer.
 */
export async function startReferenceTrainer(modelPath: string, o: ReferenceTrainerOptions): Promise<Trainer> {
  rmSync(o.checkpointDir, { recursive: true, force: true });
  // tfjs loads only when a run trains.
  const { Trainer: Tf } = await import("../trainer/trainer.js");
  const tf = await Tf.fromGguf(modelPath, { lr: o.lr, maxGradNorm: o.maxGradNorm, version: 0, clock: o.clock });
  return referenceTrainer(tf, o);
}
