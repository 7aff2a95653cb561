// `arbor export`'s work: every run of a trajectory store as a trajectory file (one row per call) and one batch per
// run — per iteration of the run where its groups record one (a sync run), as the run trained on them — built by
// the one batch builder (build-batch.ts) with the run's configured estimator over its complete groups (every
// program rewarded), written with the existing batch exports (JSONL, Arrow, safetensors) or as Parquet from the
// Arrow batch. Layout under `out`: `trajectories.<ext>` and `batches/<run id>[-it<k>].<ext>`. A run's held-out
// evaluation groups (Group.heldOutVersion) are in its trajectory rows, marked by `held_out_version`, and in no
// batch: they were never trained on. (Stores written before held-out programs joined their run's id keep them
// in a run of their own, `<run>-eval`, marked in its config: that run has no batch either.)
import { join } from "node:path";
import { ArborError } from "../core/errors.js";
import { makeOutputDir } from "../core/output-dir.js";
import { heldOutRunOf } from "../core/held-out-run.js";
import type { Group, Trajectory } from "../core/types.js";
import { writeFileAtomic } from "../model/atomic-file.js";
import { isHeldOutGroup, supersededGroupIds } from "../store/held-out-groups.js";
import type { RunRecord, TrajectoryStore } from "../store/trajectory-store.js";
import { buildTrainingBatch } from "./build-batch.js";
import { createEstimator } from "./estimators/registry.js";
import { writeArrowBatch, type ExportedBatch } from "./export-arrow.js";
import { writeSamplesJsonl } from "./export-jsonl.js";
import { batchToParquet } from "./export-parquet.js";
import { batchToSafetensors } from "./export-safetensors.js";
import { EXPORT_FORMATS, formatExtension, writeTrajectories, type ExportFormat } from "./export-trajectories.js";
import { trajectoryRows } from "./trajectory-rows.js";
import { fileSafeName } from "../core/file-safe-name.js";

/** What `exportStore` wrote. */
export interface StoreExport {
  trajectoriesPath: string;
  rows: number;
  /** One per run (per iteration of a sync run) with at least one complete group; those without one are in `skipped`. */
  batches: { runId: string; iteration?: number; path: string; samples: number }[];
  skipped: { runId: string; iteration?: number; reason: string }[];
}

/** Check a `--format` value; throws an {@link ArborError} listing the formats. */
export function checkExportFormat(format: string): ExportFormat {
  if (!(EXPORT_FORMATS as readonly string[]).includes(format)) {
    throw new ArborError(`--format: unknown format '${format}' (known: ${EXPORT_FORMATS.join(", ")})`, "config");
  }
  return format as ExportFormat;
}

/** The run's `train.estimator` and its options from the stored config JSON (GRPO when it names none). */
function estimatorOf(run: RunRecord): { estimator: string; estimatorOptions: Record<string, unknown> } {
  let cfg: { train?: { estimator?: unknown; estimatorOptions?: unknown } } = {};
  try {
    cfg = JSON.parse(run.configJson) as typeof cfg;
  } catch {
    // A run whose config is not JSON trains with the default estimator.
  }
  const estimator = typeof cfg?.train?.estimator === "string" ? cfg.train.estimator : "grpo";
  const opts = cfg?.train?.estimatorOptions;
  return { estimator, estimatorOptions: typeof opts === "object" && opts !== null ? (opts as Record<string, unknown>) : {} };
}

/**
 * The batch of one run over its groups whose every program has a finite reward, or why there is none (a held-out
 * evaluation's run never has one: its programs are never trained on). `iteration`: the groups are a sync
 * iteration's, whose batch had them all (every ended program is rewarded); one without a reward for every program
 * means a kill or an abort cut the iteration before its batch was taken, so there is none.
 */
export function runBatch(run: RunRecord, trajectories: readonly Trajectory[], groups: readonly Group[], id: string = run.id, iteration?: number): ExportedBatch | string {
  const of = heldOutRunOf(run.configJson);
  if (of !== undefined) return `held-out evaluation of run ${of}: never trained on`;
  const byId = new Map(trajectories.map((t) => [t.program.id, t]));
  const complete = groups.filter((g) => g.programIds.length > 0 && g.programIds.every((id) => Number.isFinite(byId.get(id)?.reward?.total)));
  if (complete.length === 0) return "no group has a reward for every program";
  if (iteration !== undefined && complete.length < groups.length) {
    return `iteration ${iteration} was cut before its batch was taken (${complete.length} of its ${groups.length} groups have a reward for every program): never trained on`;
  }
  const estimator = estimatorOf(run);
  // A run stored before its estimator's options were checked (a misspelt key was ignored then) has no batch to
  // rebuild, which is that run's outcome, not the whole export's: the other runs and every trajectory row still go out.
  try {
    createEstimator(estimator.estimator, estimator.estimatorOptions);
  } catch (e) {
    if (e instanceof ArborError) return `its stored config is refused: ${e.message}`;
    throw e;
  }
  const ids = new Set(complete.flatMap((g) => g.programIds));
  const built = buildTrainingBatch({ id, trajectories: trajectories.filter((t) => ids.has(t.program.id)), groups: complete, ...estimator, mode: "merged" });
  return built.batch;
}

/**
 * A run's groups as the batches it trained on: one per iteration (`<run>-it<k>`, the loop's batch id) where the
 * groups record their iteration, in iteration order; groups that record none (an async run's, a store written
 * before iterations were recorded) make one batch named after the run. An iteration's groups of an attempt a kill
 * cut are in none: the resumed run trained on the iteration's last attempt.
 */
function byIteration(runId: string, groups: readonly Group[]): { id: string; iteration?: number; groups: Group[] }[] {
  const parts = new Map<number | undefined, Group[]>();
  const superseded = supersededGroupIds(groups);
  for (const g of groups) {
    if (isHeldOutGroup(g) || superseded.has(g.id)) continue;
    const list = parts.get(g.iteration);
    if (list) list.push(g);
    else parts.set(g.iteration, [g]);
  }
  const out = [...parts].map(([iteration, gs]) => (iteration === undefined ? { id: runId, groups: gs } : { id: `${runId}-it${iteration}`, iteration, groups: gs }));
  if (out.length === 0) return [{ id: runId, groups: [] }];
  return out.sort((a, b) => (a.iteration ?? 0) - (b.iteration ?? 0));
}

async function writeBatch(path: string, batch: ExportedBatch, format: ExportFormat): Promise<void> {
  switch (format) {
    case "jsonl":
      return writeSamplesJsonl(path, batch.samples);
    case "arrow":
      return writeArrowBatch(path, batch);
    case "safetensors": {
      const bytes = batchToSafetensors(batch);
      return writeFileAtomic(path, (put) => put(bytes));
    }
    case "parquet": {
      const bytes = batchToParquet(batch);
      return writeFileAtomic(path, (put) => put(bytes));
    }
  }
}

/**
 * Export every run of `store` to the folder `out` (created) in `format`. Throws an {@link ArborError} when the
 * store has no run, and the batch builder's error (naming the program) when a run's trajectories are inconsistent.
 */
export async function exportStore(store: TrajectoryStore, opts: { format: ExportFormat; out: string }): Promise<StoreExport> {
  const runs = await store.listRuns();
  if (runs.length === 0) throw new ArborError("the store has no run to export", "config");
  const ext = formatExtension(opts.format);
  makeOutputDir(join(opts.out, "batches"), "--out");
  const allTrajectories: Trajectory[] = [];
  const batches: ExportedBatch[] = [];
  const groupsById = new Map<string, Group>();
  const superseded = new Set<string>();
  const result: StoreExport = { trajectoriesPath: join(opts.out, `trajectories.${ext}`), rows: 0, batches: [], skipped: [] };
  for (const run of runs) {
    const trajectories = await store.listTrajectories(run.id);
    allTrajectories.push(...trajectories);
    const groups = await store.listGroups(run.id);
    for (const g of groups) groupsById.set(g.id, g);
    for (const id of supersededGroupIds(groups)) superseded.add(id);
    for (const part of byIteration(run.id, groups)) {
      const at = part.iteration !== undefined ? { iteration: part.iteration } : {};
      const batch = runBatch(run, trajectories, part.groups, part.id, part.iteration);
      if (typeof batch === "string") {
        result.skipped.push({ runId: run.id, ...at, reason: batch });
        continue;
      }
      const path = join(opts.out, "batches", `${fileSafeName(part.id)}.${ext}`);
      await writeBatch(path, batch, opts.format);
      batches.push(batch);
      result.batches.push({ runId: run.id, ...at, path, samples: batch.samples.length });
    }
  }
  const rows = trajectoryRows(allTrajectories, batches, groupsById, superseded);
  await writeTrajectories(result.trajectoriesPath, rows, opts.format);
  result.rows = rows.length;
  return result;
}
