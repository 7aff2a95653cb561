// A scored batch as one Arrow IPC file (docs/batch-schema.md): one row per token of every sample, in sample
// order, with the prefix-tree node of each token so that flat trainers group rows by `sample` and tree
// trainers deduplicate rows by `node`. Per-sample and per-batch facts travel in the schema metadata as JSON.
// Logprobs, advantages and weights are float64 so the samples come back bit-exact.
import { makeTable, tableFromIPC, tableToIPC, type Table } from "apache-arrow";
import { readFileSync } from "node:fs";
import { ArborError } from "../core/errors.js";
import { writeFileAtomic } from "../model/atomic-file.js";
import type { ProgramOutcome, ScoredSample } from "./batch-sample.js";
import { validateLossSpec, type LossSpec } from "./estimators/loss-spec.js";
import { buildTreeBatch } from "./tree/tree-batch.js";
import type { TreeStats } from "./tree/tree-stats.js";

/** Version of the Arrow batch schema; bumped on any incompatible change. */
export const ARROW_SCHEMA_VERSION = "arbor.batch.v1";

/** A batch as it travels to trainers. */
export interface ExportedBatch {
  id: string;
  samples: ScoredSample[];
  loss: LossSpec;
  /** The outcomes (rewards, chunk counts) of the batch's programs, for trainer-side logging. */
  programs?: ProgramOutcome[];
}

/** What a reader gets back: the batch plus the tree statistics the writer computed. */
export interface ImportedBatch extends ExportedBatch {
  stats: TreeStats;
}

/** What the `arbor.samples` metadata (Arrow and safetensors files alike) holds of each sample. */
export type SampleMeta = Pick<ScoredSample, "id" | "programId" | "groupId" | "taskId" | "callIds" | "segment">;

/** The `arbor.samples` entries of samples: their ids, program, group, task, calls and segment. */
export function sampleMeta(samples: readonly ScoredSample[]): SampleMeta[] {
  return samples.map((s) => ({ id: s.id, programId: s.programId, groupId: s.groupId, taskId: s.taskId, callIds: s.callIds, segment: s.segment }));
}

function fail(message: string): never {
  throw new ArborError(`arrow batch: ${message}`, "batch");
}

/** Serialise a batch to Arrow IPC file bytes. Throws an {@link ArborError} on malformed samples (via the tree). */
export function batchToArrow(batch: ExportedBatch): Uint8Array {
  const tb = buildTreeBatch(batch.samples, batch.loss);
  const rows = batch.samples.reduce((a, s) => a + s.tokenIds.length, 0);
  const cols = {
    sample: new Int32Array(rows),
    token_index: new Int32Array(rows),
    token_id: new Int32Array(rows),
    node: new Int32Array(rows),
    parent: new Int32Array(rows),
    position: new Int32Array(rows),
    loss_mask: new Uint8Array(rows),
    advantage: new Float64Array(rows),
    old_logprob: new Float64Array(rows),
    weight: new Float64Array(rows),
    version: new Int32Array(rows),
    chunk: new Int32Array(rows),
    unit: new Int32Array(rows).fill(-1),
  };
  const rowOf: number[] = [];
  let r = 0;
  batch.samples.forEach((s, si) => {
    const path = tb.tree.samplePaths[si] as Int32Array;
    rowOf.push(r);
    for (let i = 0; i < s.tokenIds.length; i++, r++) {
      const node = path[i] as number;
      cols.sample[r] = si;
      cols.token_index[r] = i;
      cols.token_id[r] = s.tokenIds[i] as number;
      cols.node[r] = node;
      cols.parent[r] = tb.tree.parents[node] as number;
      cols.position[r] = tb.tree.positions[node] as number;
      cols.loss_mask[r] = s.lossMask[i] as number;
      cols.advantage[r] = s.advantages[i] as number;
      cols.old_logprob[r] = s.oldLogprobs[i] as number;
      cols.weight[r] = s.weights[i] as number;
      cols.version[r] = s.versions[i] as number;
      cols.chunk[r] = s.chunks[i] as number;
    }
  });
  for (let j = 0; j < tb.termUnit.length; j++) {
    cols.unit[(rowOf[tb.tree.terms.sample[j] as number] as number) + (tb.termToken[j] as number)] = tb.termUnit[j] as number;
  }
  const table = makeTable(cols);
  const meta = sampleMeta(batch.samples);
  table.schema.metadata.set("arbor.schema", ARROW_SCHEMA_VERSION);
  table.schema.metadata.set("arbor.batch_id", batch.id);
  table.schema.metadata.set("arbor.loss", JSON.stringify(batch.loss));
  table.schema.metadata.set("arbor.samples", JSON.stringify(meta));
  table.schema.metadata.set("arbor.tree_stats", JSON.stringify(tb.stats));
  if (batch.programs) table.schema.metadata.set("arbor.programs", JSON.stringify(batch.programs));
  return tableToIPC(table, "file");
}

function column<T extends ArrayLike<number>>(table: Table, name: string): T {
  const c = table.getChild(name);
  if (!c) fail(`missing column '${name}'`);
  return c.toArray() as unknown as T;
}

function metaJson(table: Table, key: string): unknown {
  const raw = table.schema.metadata.get(key);
  if (raw === undefined) fail(`missing schema metadata '${key}'`);
  try {
    return JSON.parse(raw);
  } catch (e) {
    fail(`schema metadata '${key}' is not JSON: ${(e as Error).message}`);
  }
}

/** Read a batch written by {@link batchToArrow}; throws an {@link ArborError} naming what is missing or inconsistent. */
export function batchFromArrow(bytes: Uint8Array): ImportedBatch {
  let table: Table;
  try {
    table = tableFromIPC(bytes) as Table;
  } catch (e) {
    fail(`not an Arrow IPC file: ${(e as Error).message}`);
  }
  // The reader returns an empty table for bytes that are not Arrow at all.
  if (table.schema.fields.length === 0) fail("not an Arrow IPC file (no columns)");
  const schema = table.schema.metadata.get("arbor.schema");
  if (schema !== ARROW_SCHEMA_VERSION) fail(`schema is '${schema}', this reader understands '${ARROW_SCHEMA_VERSION}'`);
  const meta = metaJson(table, "arbor.samples") as SampleMeta[];
  const samples: ScoredSample[] = meta.map((m) => ({ ...m, tokenIds: [], lossMask: [], oldLogprobs: [], versions: [], chunks: [], advantages: [], weights: [] }));
  const sample = column<Int32Array>(table, "sample");
  const tokenIndex = column<Int32Array>(table, "token_index");
  const tokenId = column<Int32Array>(table, "token_id");
  const lossMask = column<Uint8Array>(table, "loss_mask");
  const advantage = column<Float64Array>(table, "advantage");
  const oldLogprob = column<Float64Array>(table, "old_logprob");
  const weight = column<Float64Array>(table, "weight");
  const version = column<Int32Array>(table, "version");
  const chunk = column<Int32Array>(table, "chunk");
  for (let r = 0; r < table.numRows; r++) {
    const s = samples[sample[r] as number];
    if (!s) fail(`row ${r}: sample ${sample[r]} is not among the ${samples.length} samples of the metadata`);
    if (tokenIndex[r] !== s.tokenIds.length) fail(`row ${r}: token_index ${tokenIndex[r]} out of order in sample ${sample[r]}`);
    s.tokenIds.push(tokenId[r] as number);
    s.lossMask.push(lossMask[r] as number);
    s.oldLogprobs.push(oldLogprob[r] as number);
    s.advantages.push(advantage[r] as number);
    s.weights.push(weight[r] as number);
    s.versions.push(version[r] as number);
    s.chunks.push(chunk[r] as number);
  }
  const id = table.schema.metadata.get("arbor.batch_id") ?? fail("missing schema metadata 'arbor.batch_id'");
  const out: ImportedBatch = { id, samples, loss: validateLossSpec(metaJson(table, "arbor.loss") as LossSpec), stats: metaJson(table, "arbor.tree_stats") as TreeStats };
  if (table.schema.metadata.has("arbor.programs")) out.programs = metaJson(table, "arbor.programs") as ProgramOutcome[];
  return out;
}

/** Write a batch as an Arrow IPC file at `path` (appears only when complete). */
export function writeArrowBatch(path: string, batch: ExportedBatch): void {
  const bytes = batchToArrow(batch);
  writeFileAtomic(path, (put) => put(bytes));
}

/** Read an Arrow batch file written by {@link writeArrowBatch}. */
export function readArrowBatch(path: string): ImportedBatch {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    fail(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (e as Error).message}`);
  }
  return batchFromArrow(bytes);
}
