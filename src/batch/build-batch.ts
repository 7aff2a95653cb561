// The batch builder in one call: trajectories → samples (per-call or merged) → advantages and loss weights
// (a registered estimator) → the prefix tree a trainer consumes, plus what was dropped and the tree statistics.
import type { Group, Trajectory } from "../core/types.js";
import type { DroppedGroup } from "./estimators/estimator.js";
import { createEstimator } from "./estimators/registry.js";
import type { ExportedBatch } from "./export-arrow.js";
import { buildTreeBatch, type TreeBatch } from "./tree/tree-batch.js";
import { buildSampleSet, type SampleMode } from "./trajectory-samples.js";

/** Options of {@link buildTrainingBatch}. */
export interface BuildBatchOptions {
  id: string;
  trajectories: readonly Trajectory[];
  groups: readonly Group[];
  /** A name from estimators/registry.ts (default "grpo"). */
  estimator?: string;
  estimatorOptions?: Record<string, unknown>;
  mode?: SampleMode;
}

/** A built batch: the samples as exported, the packed tree, and the groups dynamic sampling dropped. */
export interface BuiltBatch {
  batch: ExportedBatch;
  tree: TreeBatch;
  dropped: DroppedGroup[];
}

/** Build one training batch (errors are the {@link ArborError}s of each stage, naming program and field). */
export function buildTrainingBatch(opts: BuildBatchOptions): BuiltBatch {
  const estimator = createEstimator(opts.estimator ?? "grpo", opts.estimatorOptions ?? {});
  const set = buildSampleSet(opts.trajectories, opts.groups, opts.mode ?? "merged");
  const scored = estimator.score(set);
  const dropped = new Set(scored.dropped.map((d) => d.groupId));
  return {
    batch: { id: opts.id, samples: scored.samples, loss: scored.loss, programs: set.programs.filter((p) => !dropped.has(p.groupId)) },
    tree: buildTreeBatch(scored.samples, scored.loss),
    dropped: scored.dropped,
  };
}
