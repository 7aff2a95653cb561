// Types of sqlite-writer.mjs (the SQLite store's writer, plain JavaScript so a worker thread can load it).
import type Database from "better-sqlite3";

/**
 * One statement of a guarded write. Without `expect` it is run; with it, it is a check: `row` fails
 * the write unless the query finds a row, `none` fails it if it does. `fail` is the message, with
 * `{column}` replaced by that column of the row found.
 */
export interface WriteStep {
  sql: string;
  params: unknown[];
  expect?: "row" | "none";
  fail?: string;
}

/** Apply writes in one transaction, each in its own savepoint: null per committed write, else why not. */
export function applyBatch(db: Database.Database, writes: WriteStep[][]): (string | null)[];

/** Open a writing connection with the store's settings (WAL, foreign keys, the given synchronous level). */
export function openWriter(path: string, synchronous: "full" | "normal"): Database.Database;
