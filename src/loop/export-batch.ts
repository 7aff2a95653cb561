// Where the loop's batches go on disk: each step's built batch as JSONL (src/batch/export-jsonl.ts), one line
// per scored sample — the very samples the trainer is given, with their advantages and loss weights.
import { join } from "node:path";
import type { BuiltBatch } from "../batch/build-batch.js";
import { writeSamplesJsonl } from "../batch/export-jsonl.js";

/** An exporter for runTrainLoop writing `dir/nameOf(step)`; resolves to the path once the file is complete. */
export function jsonlBatchExporter(dir: string, nameOf: (step: number) => string): (step: number, built: BuiltBatch) => Promise<string> {
  return async (step, built) => {
    const path = join(dir, nameOf(step));
    await writeSamplesJsonl(path, built.batch.samples);
    return path;
  };
}
