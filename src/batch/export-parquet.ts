// Arrow tables as Parquet files through parquet-wasm (Apache Arrow's Rust Parquet writer compiled to
// WebAssembly): trajectories (trajectory-table.ts) and batches (the Arrow batch of export-arrow.ts, same columns
// and schema metadata), so datasets go to trainers that read Parquet (verl, pandas, pyarrow, Hugging Face
// datasets). Snappy compression: every Parquet reader has it (zstd is not in all pure-JS/Python readers).
import { tableFromIPC, tableToIPC, type Table } from "apache-arrow";
import { Compression, Table as WasmTable, writeParquet, WriterPropertiesBuilder } from "parquet-wasm";
import { writeFileAtomic } from "../model/atomic-file.js";
import { batchToArrow, type ExportedBatch } from "./export-arrow.js";

/** An Arrow table as Parquet file bytes; the schema's metadata (e.g. `arbor.schema`) travels in the file's Arrow schema. */
export function tableToParquet(table: Table): Uint8Array {
  // parquet-wasm takes Arrow IPC stream bytes: the hand-over between the JS and the wasm Arrow.
  const wasmTable = WasmTable.fromIPCStream(tableToIPC(table, "stream"));
  const props = new WriterPropertiesBuilder().setCompression(Compression.SNAPPY).build();
  return writeParquet(wasmTable, props);
}

/** A batch as Parquet bytes: the rows, columns and metadata of its Arrow file (docs/batch-schema.md). */
export function batchToParquet(batch: ExportedBatch): Uint8Array {
  return tableToParquet(tableFromIPC(batchToArrow(batch)));
}

/** Write an Arrow table to `path` as Parquet (appears only when complete). */
export function writeParquetFile(path: string, table: Table): void {
  const bytes = tableToParquet(table);
  writeFileAtomic(path, (put) => put(bytes));
}
