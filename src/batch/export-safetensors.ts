// A tree batch as a safetensors file (docs/batch-schema.md): the packed prefix tree's arrays as tensors, for
// trainers that load tensors directly. src/model/safetensors.ts writes F32 only, so integer arrays are stored
// as F32 — exact for integers of magnitude <= 2^24, which every id and index here is checked against.
import { readSafetensors, writeSafetensors } from "../model/safetensors.js";
import type { Tensor } from "../model/weights.js";
import { ArborError } from "../core/errors.js";
import { validateLossSpec, type LossSpec } from "./estimators/loss-spec.js";
import type { TreeBatch } from "./tree/tree-batch.js";
import type { TreeStats } from "./tree/tree-stats.js";

/** Version of the safetensors tree schema. */
export const SAFETENSORS_SCHEMA_VERSION = "arbor.tree.v1";

const F32_EXACT = 2 ** 24;

function fail(message: string): never {
  throw new ArborError(`safetensors batch: ${message}`, "batch");
}

function ints(name: string, data: Int32Array): Tensor {
  for (let i = 0; i < data.length; i++) {
    const v = data[i] as number;
    if (v > F32_EXACT || v < -F32_EXACT) fail(`${name}[${i}] = ${v} is beyond 2^24 and cannot be stored exactly as F32`);
  }
  return { name, shape: [data.length], data: Float32Array.from(data) };
}

/** Write a tree batch to `path` (atomically, via src/model/safetensors.ts). */
export function writeTreeSafetensors(path: string, batch: TreeBatch, batchId: string): void {
  const { tree } = batch;
  const offsets = new Int32Array(tree.samplePaths.length + 1);
  tree.samplePaths.forEach((p, i) => (offsets[i + 1] = (offsets[i] as number) + p.length));
  const flatPaths = new Int32Array(offsets[offsets.length - 1] as number);
  tree.samplePaths.forEach((p, i) => flatPaths.set(p, offsets[i] as number));
  const tensors: Tensor[] = [
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
  writeSafetensors(path, tensors, {
    "arbor.schema": SAFETENSORS_SCHEMA_VERSION,
    "arbor.batch_id": batchId,
    "arbor.loss": JSON.stringify(batch.loss),
    "arbor.tree_stats": JSON.stringify(batch.stats),
  });
}

/** Read a tree batch written by {@link writeTreeSafetensors}. */
export function readTreeSafetensors(path: string): TreeBatch & { batchId: string } {
  const { tensors, metadata } = readSafetensors(path);
  if (metadata["arbor.schema"] !== SAFETENSORS_SCHEMA_VERSION) fail(`${path}: schema is '${metadata["arbor.schema"]}', expected '${SAFETENSORS_SCHEMA_VERSION}'`);
  const byName = new Map(tensors.map((t) => [t.name, t.data]));
  const get = (name: string): Float32Array => byName.get(name) ?? fail(`${path}: missing tensor '${name}'`);
  const int = (name: string): Int32Array => Int32Array.from(get(name));
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
