// A tree batch as a safetensors file (docs/batch-schema.md): the packed prefix tree's arrays as tensors, for
// trainers that load tensors directly. Ids, indices, positions and offsets are I32 tensors; advantages, old
// logprobs and weights are F32. Files of the older schema arbor.tree.v1 (every tensor F32) are still read.
// The same bytes are served by the trainer protocol (GET /v1/batches/next?format=safetensors) to trainers
// that read tensors with numpy alone, so the in-memory form carries the samples' metadata as the Arrow file does.
import { isIntTensor, readSafetensors, safetensorsBytes, type AnyTensor, type IntTensor } from "../model/safetensors.js";
import { writeFileAtomic } from "../model/atomic-file.js";
import { ArborError } from "../core/errors.js";
import { validateLossSpec, type LossSpec } from "./estimators/loss-spec.js";
import { sampleMeta, type ExportedBatch } from "./export-arrow.js";
import { buildTreeBatch, type TreeBatch } from "./tree/tree-batch.js";
import type { TreeStats } from "./tree/tree-stats.js";

/** Version of the safetensors tree schema written (v2: integer arrays as I32). */
export const SAFETENSORS_SCHEMA_VERSION = "arbor.tree.v2";

/** The previous schema, every tensor F32 (integers exact within ±2^24); still readable. */
const SCHEMA_V1 = "arbor.tree.v1";

function fail(message: string): never {
  throw new ArborError(`safetensors batch: ${message}`, "batch");
}

function ints(name: string, data: Int32Array): IntTensor {
  return { name, shape: [data.length], data };
}

/**
 * A tree batch as safetensors bytes (schema arbor.tree.v2). `metadata` adds entries to the file's metadata
 * (e.g. `arbor.samples`); the schema, batch id, loss and tree stats always come from `batch`.
 */
export function treeToSafetensors(batch: TreeBatch, batchId: string, metadata: Record<string, string> = {}): Uint8Array {
  const { tree } = batch;
  const offsets = new Int32Array(tree.samplePaths.length + 1);
  tree.samplePaths.forEach((p, i) => (offsets[i + 1] = (offsets[i] as number) + p.length));
  const flatPaths = new Int32Array(offsets[offsets.length - 1] as number);
  tree.samplePaths.forEach((p, i) => flatPaths.set(p, offsets[i] as number));
  const tensors: AnyTensor[] = [
    ints("tokens", tree.tokens),
    ints("parents", tree.parents),
    ints("positions", tree.positions),
    ints("term_node", tree.terms.node),
    ints("term_target", tree.terms.target),
    ints("term_sample", tree.terms.sample),
    ints("term_unit", batch.termUnit),
    ints("term_token", batch.termToken),
    { name: "term_advantage", shape: [tree.terms.advantage.length], data: tree.terms.advantage },
    { name: "term_old_logprob", shape: [tree.terms.oldLogprob.length], data: tree.terms.oldLogprob },
    { name: "term_weight", shape: [tree.terms.weight.length], data: tree.terms.weight },
    ints("sample_offsets", offsets),
    ints("sample_paths", flatPaths),
  ];
  return safetensorsBytes(tensors, {
    ...metadata,
    "arbor.schema": SAFETENSORS_SCHEMA_VERSION,
    "arbor.batch_id": batchId,
    "arbor.loss": JSON.stringify(batch.loss),
    "arbor.tree_stats": JSON.stringify(batch.stats),
  });
}

/**
 * A whole exported batch as safetensors bytes: the prefix tree of every sample (built as `offer()` and the
 * Arrow export build it, or `tree` when the caller has it already) plus `arbor.samples` (and `arbor.programs`
 * when the batch has them) in the metadata, the same JSON as the Arrow file's.
 */
export function batchToSafetensors(batch: ExportedBatch, tree: TreeBatch = buildTreeBatch(batch.samples, batch.loss)): Uint8Array {
  const metadata: Record<string, string> = { "arbor.samples": JSON.stringify(sampleMeta(batch.samples)) };
  if (batch.programs) metadata["arbor.programs"] = JSON.stringify(batch.programs);
  return treeToSafetensors(tree, batch.id, metadata);
}

/** Write a tree batch to `path` (atomically). */
export function writeTreeSafetensors(path: string, batch: TreeBatch, batchId: string): void {
  const bytes = treeToSafetensors(batch, batchId);
  writeFileAtomic(path, (put) => put(bytes));
}

/**
 * Read a tree batch written by {@link writeTreeSafetensors} (schema arbor.tree.v2), or an older arbor.tree.v1
 * file whose integer arrays are F32.
 */
export function readTreeSafetensors(path: string): TreeBatch & { batchId: string } {
  const { tensors, metadata } = readSafetensors(path);
  const schema = metadata["arbor.schema"];
  if (schema !== SAFETENSORS_SCHEMA_VERSION && schema !== SCHEMA_V1) {
    fail(`${path}: schema is '${schema}', expected '${SAFETENSORS_SCHEMA_VERSION}' (or the older '${SCHEMA_V1}')`);
  }
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const tensor = (name: string): AnyTensor => byName.get(name) ?? fail(`${path}: missing tensor '${name}'`);
  const get = (name: string): Float32Array => {
    const t = tensor(name);
    return isIntTensor(t) ? fail(`${path}: tensor '${name}' is I32, schema ${schema} stores it as F32`) : t.data;
  };
  const int = (name: string): Int32Array => {
    const t = tensor(name);
    if (isIntTensor(t)) {
      if (schema === SCHEMA_V1) fail(`${path}: tensor '${name}' is I32, schema ${SCHEMA_V1} stores it as F32`);
      return t.data;
    }
    if (schema !== SCHEMA_V1) fail(`${path}: tensor '${name}' is F32, schema ${schema} stores it as I32`);
    const out = Int32Array.from(t.data);
    const bad = t.data.findIndex((v, i) => v !== out[i]);
    if (bad >= 0) fail(`${path}: tensor '${name}'[${bad}] = ${t.data[bad]} is not an int32`);
    return out;
  };
  const offsets = int("sample_offsets");
  const flat = int("sample_paths");
  const samplePaths: Int32Array[] = [];
  for (let i = 0; i + 1 < offsets.length; i++) samplePaths.push(flat.slice(offsets[i], offsets[i + 1]));
  return {
    batchId: metadata["arbor.batch_id"] ?? "",
    tree: {
      tokens: int("tokens"),
      parents: int("parents"),
      positions: int("positions"),
      terms: {
        node: int("term_node"),
        target: int("term_target"),
        sample: int("term_sample"),
        advantage: get("term_advantage"),
        oldLogprob: get("term_old_logprob"),
        weight: get("term_weight"),
      },
      samplePaths,
    },
    termUnit: int("term_unit"),
    termToken: int("term_token"),
    loss: validateLossSpec(JSON.parse(metadata["arbor.loss"] ?? "null") as LossSpec),
    stats: JSON.parse(metadata["arbor.tree_stats"] ?? "null") as TreeStats,
  };
}
