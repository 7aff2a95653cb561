// `arbor export <store> --format … --out <dir>`: the store's trajectories and per-run batches as files
// (batch/export-store.ts), with what was written printed one line each.
import { checkExportFormat, exportStore } from "../batch/export-store.js";
import { openStoreArg } from "./store-arg.js";

/** Run `arbor export`; errors (unknown format, missing store) are ArborErrors with one-line messages. */
export async function exportCommand(storeArg: string, opts: { format: string; out: string }): Promise<void> {
  const format = checkExportFormat(opts.format);
  const { store } = await openStoreArg(storeArg);
  try {
    const r = await exportStore(store, { format, out: opts.out });
    console.log(`trajectories  ${r.trajectoriesPath} (${r.rows} calls)`);
    for (const b of r.batches) console.log(`batch         ${b.path} (run ${b.runId}${b.iteration !== undefined ? ` iteration ${b.iteration}` : ""}, ${b.samples} samples)`);
    for (const s of r.skipped) console.log(`no batch      run ${s.runId}${s.iteration !== undefined ? ` iteration ${s.iteration}` : ""}: ${s.reason}`);
  } finally {
    await store.close();
  }
}
