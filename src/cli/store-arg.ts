// The `<store>` argument of `arbor inspect` and `arbor export`: a SQLite store file (as `arbor run` writes it,
// `<output.dir>/store.sqlite`), a run's output folder holding one, or a Postgres URL (`postgres://…`, the
// store's default schema `arbor`; `?schema=` names another). A missing file is an error, never a new empty store.
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { ArborError } from "../core/errors.js";
import { openStore } from "../store/registry.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";

/** Whether `arg` is a Postgres URL rather than a SQLite file or folder. */
export function isPostgresArg(arg: string): boolean {
  return /^postgres(ql)?:\/\//.test(arg);
}

/**
 * Open the store `arg` names; `label` is how messages name it, `path` the SQLite file (absent for Postgres).
 * Throws an {@link ArborError} for a missing file.
 */
export async function openStoreArg(arg: string): Promise<{ store: TrajectoryStore; label: string; path?: string }> {
  if (isPostgresArg(arg)) {
    const url = new URL(arg);
    const schema = url.searchParams.get("schema") ?? undefined;
    url.searchParams.delete("schema");
    const store = await openStore({ kind: "postgres", url: url.toString(), ...(schema !== undefined ? { schema } : {}) });
    return { store, label: `postgres store ${url.host}${url.pathname}${schema !== undefined ? ` (schema ${schema})` : ""}` };
  }
  let path = arg;
  if (existsSync(path) && statSync(path).isDirectory()) path = join(path, "store.sqlite");
  if (!existsSync(path)) throw new ArborError(`store: no such file: ${path}`, "config");
  // SQLite takes an empty file for a new database, and opening a store writes its schema: reading commands
  // (inspect, export, report) would turn any empty file into a store.
  if (statSync(path).size === 0) throw new ArborError(`store: ${path} is an empty file, not an Arbor store`, "config");
  return { store: await openStore({ kind: "sqlite", path }), label: path, path };
}
