// One RL policy update on the in-process reference trainer: the training batch the loop built (a registered
// advantage estimator, merged multi-call samples, prefix tree) → one reference-trainer step (`epochs` optimizer
// steps on the same batch, at the scheduled learning rate) → one versioned GGUF checkpoint the engines can load. Samples whose every advantage is 0 (a group whose programs all got the same
// reward, under GRPO) are left out of the step: they add nothing to the loss or its gradient, and the weights
// already normalise over the whole batch, so the step is unchanged and cheaper.
import type { ScoredSample } from "../batch/batch-sample.js";
import type { BuiltBatch } from "../batch/build-batch.js";
import { buildTreeBatch, type TreeBatch } from "../batch/tree/tree-batch.js";
import type { Trainer } from "../trainer/trainer.js";

export interface RlUpdateOptions {
  /** Directory of the versioned checkpoints (`policy-v{N}.gguf` + manifest.json). */
  checkpointDir: string;
  keepCheckpoints?: number;
  /** Optimizer steps on each batch (default 1); one version is published per batch however many. */
  epochs?: number;
  /** Learning rate of each optimizer step (1-based over the run); absent: the trainer's fixed rate. */
  lrAt?: (optimizerStep: number) => number;
  /** Sees the tree the trainer steps on, just before the step (tests check it against the exported batch). */
  onTree?: (tree: TreeBatch) => void;
}

export interface RlUpdate {
  /** False when no sample had a non-zero advantage: no step was taken and the version did not move. */
  stepped: boolean;
  /** Policy version after the update. */
  version: number;
  /** Checkpoint of `version` (written only when a step was taken). */
  checkpoint?: string;
  loss: number;
  gradNorm: number;
  /** Fraction of terms the PPO clip bounded, averaged over the batch's epochs. */
  clipFraction: number;
  /** Learning rate of the batch's last optimizer step (absent when no step was taken). */
  lr?: number;
  /** KL(sampling policy ‖ trainer) over the step's terms (k3; loss-spec.ts). */
  kl: number;
  /** The policy's mean token entropy over the step's loss terms, from the trainer's logits (NaN when no step ran or the trainer is external). */
  entropy: number;
  /** Samples in the batch and those that carried a non-zero advantage into the step. */
  samples: number;
  trainedSamples: number;
  /** Tokens the trainer ran (tree nodes) and what a flat layout of the same samples would have run. */
  treeTokens: number;
  flatTokens: number;
  /** Groups that dynamic sampling dropped (estimators that do it, e.g. DAPO). */
  droppedGroups: number;
  /** Stepped by an external trainer (train.trainer: external): loss, gradNorm, clipFraction, kl and entropy are unknown (NaN). */
  external?: true;
  /** The engines already serve `version` (an external trainer announced it, and they loaded it, before its ack). */
  synced?: true;
}

/** The samples that carry a non-zero advantage on a loss token: the only ones a step needs. */
export function samplesWithSignal<S extends ScoredSample>(samples: readonly S[]): S[] {
  return samples.filter((s) => s.advantages.some((a, i) => a !== 0 && s.lossMask[i] === 1));
}

/** Train on `built` (o.epochs optimizer steps) when it carries any signal, and publish the new weights as one checkpoint. */
export function rlUpdate(trainer: Trainer, built: BuiltBatch, o: RlUpdateOptions): RlUpdate {
  const all = built.batch.samples;
  const useful = samplesWithSignal(all);
  const base = { samples: all.length, trainedSamples: useful.length, droppedGroups: built.dropped.length };
  if (useful.length === 0) {
    return { ...base, stepped: false, version: trainer.version, loss: 0, gradNorm: 0, clipFraction: 0, kl: 0, entropy: NaN, treeTokens: 0, flatTokens: 0 };
  }
  const tb = buildTreeBatch(useful, built.batch.loss);
  o.onTree?.(tb);
  const r = trainer.step(
    { tree: tb.tree, termUnit: tb.termUnit, loss: tb.loss, sampleIds: useful.map((s) => s.id) },
    { ...(o.epochs === undefined ? {} : { epochs: o.epochs }), ...(o.lrAt ? { lrAt: o.lrAt } : {}) },
  );
  const { path } = trainer.checkpoint(o.checkpointDir, o.keepCheckpoints);
  return {
    ...base,
    stepped: true,
    version: r.version,
    checkpoint: path,
    loss: r.loss,
    gradNorm: r.gradNorm,
    clipFraction: r.clipFraction,
    lr: r.epochs[r.epochs.length - 1]?.lr,
    kl: r.kl,
    entropy: r.entropy,
    treeTokens: tb.stats.treeTokens,
    flatTokens: tb.stats.flatTokens,
  };
}
