// `arbor export <store> [--format …] [--out <dir>]`: the store's trajectories and per-run batches as files
// (batch/export-store.ts), with what was written printed one line each. By default Parquet, written to export/
// beside a SQLite store (in the run's output folder, as `arbor report` writes report/ there).
import { dirname, join } from "node:path";
import { checkExportFormat, exportStore } from "../batch/export-store.js";
import { ArborError } from "../core/errors.js";
import { isPostgresArg, openStoreArg } from "./store-arg.js";

/** Run `arbor export`; errors (unknown format, missing store, no --out for a Postgres URL) are ArborErrors with one-line messages. */
export async function exportCommand(storeArg: string, opts: { format: string; out?: string }): Promise<void> {
  const format = checkExportFormat(opts.format);
  if (opts.out === undefined && isPostgresArg(storeArg)) {
    throw new ArborError("export: --out is required for a Postgres store (there is no run folder to write beside)", "config");
  }
  const { store, path } = await openStoreArg(storeArg);
  try {
    // Without --out the store is a SQLite file (a Postgres URL without it was refused above).
    const r = await exportStore(store, { format, out: opts.out ?? join(dirname(path as string), "export") });
    console.log(`trajectories  ${r.trajectoriesPath} (${r.rows} calls)`);
    for (const b of r.batches) console.log(`batch         ${b.path} (run ${b.runId}${b.iteration !== undefined ? ` iteration ${b.iteration}` : ""}, ${b.samples} samples)`);
    for (const s of r.skipped) console.log(`no batch      run ${s.runId}${s.iteration !== undefined ? ` iteration ${s.iteration}` : ""}: ${s.reason}`);
  } finally {
    await store.close();
  }
}
