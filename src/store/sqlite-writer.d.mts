// Types of sqlite-writer.mjs (the SQLite store's writer, plain JavaScript so a worker thread can load it).
import type Database from "better-sqlite3";

/**
 * One statement of a guarded write. Without `expect` it is run; with it, it is a check: `row` fails
 * the write unless the query finds a row, `none` fails it if it does. `fail` is the message, with
 * `{column}` replaced by that column of the row found.
 */
export interface SqlStep {
  sql: string;
  params: unknown[];
  expect?: "row" | "none";
  fail?: string;
  /**
   * A call's insert: the writer appends its delta's columns to `params` (the stored messages, the stored
   * prompt ids, base index, prompt and messages shared), over the program's last committed call.
   */
  call?: { programId: string; index: number; prompt: Uint8Array; output: Uint8Array; messages: string[] };
}

/** Drop a program's last call (it ended): its context is no longer kept for a next call. */
export interface ForgetStep {
  forget: string;
}

/** One step of a write. */
export type WriteStep = SqlStep | ForgetStep;

/** Apply writes in one transaction, each in its own savepoint: null per committed write, else why not. */
export function applyBatch(db: Database.Database, writes: WriteStep[][]): (string | null)[];

/** Open a writing connection with the store's settings (WAL, foreign keys, the given synchronous level). */
export function openWriter(path: string, synchronous: "full" | "normal"): Database.Database;
