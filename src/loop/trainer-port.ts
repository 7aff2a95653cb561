// The two ports the training loop (train-loop.ts) talks to besides the rollout: a `Trainer` that takes one
// step on a built batch (the in-process reference trainer, reference-trainer.ts; or a trainer in another
// process over the trainer protocol, external-trainer.ts) and a `WeightSync` that has every engine serve the
// weights a step published (in-process engines over their HTTP API, weight-sync.ts).
import type { BuiltBatch } from "../batch/build-batch.js";
import type { RlUpdate } from "./rl-update.js";

/** Who trains the policy: one step per built batch. */
export interface Trainer {
  /** `reference` (in process) or `external` (over the trainer protocol): the iteration line says which. */
  readonly kind: "reference" | "external";
  /** Policy version of the trainer's current weights (0 at the start of a run). */
  readonly version: number;
  /**
   * Take one step on exactly `batch` (the batch the loop exported) and publish the new weights as a
   * checkpoint; `stepped: false` when the batch gave nothing to learn from (every advantage 0).
   */
  step(batch: BuiltBatch): Promise<RlUpdate>;
  /** Release the trainer (idempotent). */
  close(): Promise<void>;
}

/** Where a trainer of another process starts: a resumed run's last version and its checkpoint (absent: the model file at 0). */
export interface TrainerStart {
  version: number;
  modelPath: string;
}

/** Has every engine of the run serve a published checkpoint. */
export interface WeightSync {
  /** Resolves once every engine serves `version` from `modelPath`; rejects naming the engine that did not. */
  load(modelPath: string, version: number): Promise<void>;
}
