// Trajectory rows (trajectory-rows.ts) written in each export format (docs/batch-schema.md, "Trajectory export"):
// Parquet and Arrow IPC from one Arrow table (trajectory-table.ts), JSON Lines one row per line (slime reads
// these), and safetensors as flat token tensors with offsets plus the rows' other fields in the metadata.
import { createWriteStream } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { tableToIPC } from "apache-arrow";
import { writeFileAtomic } from "../model/atomic-file.js";
import { safetensorsBytes, type AnyTensor } from "../model/safetensors.js";
import { writeParquetFile } from "./export-parquet.js";
import type { TrajectoryRow } from "./trajectory-rows.js";
import { TRAJECTORY_SCHEMA_VERSION, trajectoryTable } from "./trajectory-table.js";

/** The formats of `arbor export`. */
export const EXPORT_FORMATS = ["parquet", "jsonl", "arrow", "safetensors"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** The per-token list columns that become flat tensors in the safetensors form (the rest go to its metadata). */
export const TENSOR_COLUMNS = ["prompt_ids", "output_ids", "logprobs", "policy_versions", "advantages"] as const;

/** File name extension of each format. */
export function formatExtension(format: ExportFormat): string {
  return format === "safetensors" ? "safetensors" : format;
}

function* jsonLines(rows: readonly TrajectoryRow[]): Generator<string> {
  for (const r of rows) yield JSON.stringify(r) + "\n";
}

/** Flat tensor + offsets of one list column; `fill` stands in for a null list (one entry per output token). */
function flat(rows: readonly TrajectoryRow[], col: (typeof TENSOR_COLUMNS)[number], float: boolean): AnyTensor[] {
  const lists = rows.map((r) => r[col] ?? r.output_ids.map(() => Number.NaN));
  const offsets = new Int32Array(rows.length + 1);
  lists.forEach((l, i) => (offsets[i + 1] = (offsets[i] as number) + l.length));
  const values = lists.flat();
  const data = float ? Float32Array.from(values) : Int32Array.from(values);
  return [
    { name: col, shape: [values.length], data } as AnyTensor,
    { name: `${col}_offsets`, shape: [offsets.length], data: offsets },
  ];
}

/** The safetensors form: I32 ids and versions, F32 logprobs and advantages (NaN where null), the rest as JSON metadata. */
function trajectorySafetensors(rows: readonly TrajectoryRow[]): Uint8Array {
  const tensors = [
    ...flat(rows, "prompt_ids", false),
    ...flat(rows, "output_ids", false),
    ...flat(rows, "logprobs", true),
    ...flat(rows, "policy_versions", false),
    ...flat(rows, "advantages", true),
  ];
  const meta = rows.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !(TENSOR_COLUMNS as readonly string[]).includes(k))));
  return safetensorsBytes(tensors, { "arbor.schema": TRAJECTORY_SCHEMA_VERSION, "arbor.rows": JSON.stringify(meta) });
}

/** Write `rows` to `path` in `format`; the file appears only when complete. */
export async function writeTrajectories(path: string, rows: readonly TrajectoryRow[], format: ExportFormat): Promise<void> {
  switch (format) {
    case "parquet":
      return writeParquetFile(path, trajectoryTable(rows));
    case "arrow": {
      const bytes = tableToIPC(trajectoryTable(rows), "file");
      return writeFileAtomic(path, (put) => put(bytes));
    }
    case "safetensors": {
      const bytes = trajectorySafetensors(rows);
      return writeFileAtomic(path, (put) => put(bytes));
    }
    case "jsonl": {
      const partial = `${path}.partial`;
      try {
        await pipeline(Readable.from(jsonLines(rows)), createWriteStream(partial));
        await rename(partial, path);
      } catch (e) {
        await rm(partial, { force: true });
        throw e;
      }
    }
  }
}
