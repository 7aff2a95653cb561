// The SQLite store's writer: applies batches of guarded writes, each batch in one transaction and
// each write in its own savepoint (a refused write leaves nothing behind and does not fail the
// others). It runs in a worker thread for a file store, so the commit's fsync never blocks the
// thread that serves requests; a `:memory:` store applies batches in process. Plain JavaScript
// because a worker thread cannot load TypeScript without a loader (types: sqlite-writer.d.mts).
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import Database from "better-sqlite3";
import { CallContexts, contextOf, deltaOver, int32s } from "./call-contexts.mjs";

/** Statements by SQL text, per connection: a batch reuses what earlier batches prepared. */
const prepared = new WeakMap();

function statement(db, sql) {
  let cache = prepared.get(db);
  if (!cache) {
    cache = new Map();
    prepared.set(db, cache);
  }
  let stmt = cache.get(sql);
  if (!stmt) {
    stmt = db.prepare(sql);
    cache.set(sql, stmt);
  }
  return stmt;
}

// Blobs cross the thread boundary as Uint8Array; better-sqlite3 binds Buffers.
function bindable(params) {
  return params.map((p) => (p instanceof Uint8Array && !Buffer.isBuffer(p) ? Buffer.from(p.buffer, p.byteOffset, p.byteLength) : p));
}

/** The step's failure message, with `{column}` replaced by that column of the row it found. */
function failure(step, row) {
  return step.fail.replace(/\{(\w+)\}/g, (whole, col) => (row && col in row ? String(row[col]) : whole));
}

class Refused extends Error {}

/** Each connection's programs' last committed calls, which their next calls are stored over. */
const callContexts = new WeakMap();

function contextsOf(db) {
  let c = callContexts.get(db);
  if (!c) {
    c = new CallContexts();
    callContexts.set(db, c);
  }
  return c;
}

/**
 * Run one step. A call's insert gets its delta's columns appended to its parameters (the stored messages and
 * prompt ids, base index, shared counts) and adds the call's context to `staged`, kept once the write commits.
 */
function runStep(db, step, staged) {
  if (step.forget !== undefined) {
    staged.push({ programId: step.forget });
    return;
  }
  let params = bindable(step.params);
  if (step.call !== undefined) {
    const c = step.call;
    const prompt = int32s(c.prompt);
    const d = deltaOver(contextsOf(db).get(c.programId), prompt, c.messages);
    const rest = Buffer.from(d.promptRest.buffer, d.promptRest.byteOffset, d.promptRest.byteLength);
    params = [...params, d.messagesRest, rest, d.baseIdx, d.promptShared, d.messagesShared];
    staged.push({ programId: c.programId, ctx: contextOf(c.index, prompt, int32s(c.output), c.messages) });
  }
  const stmt = statement(db, step.sql);
  if (step.expect === undefined) {
    stmt.run(params);
    return;
  }
  const row = stmt.get(params);
  if (step.expect === "row" && row === undefined) throw new Refused(failure(step, row));
  if (step.expect === "none" && row !== undefined) throw new Refused(failure(step, row));
}

function messageOf(e) {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Apply `writes` (each a list of steps) in one transaction. Returns one entry per write: null when
 * it was committed, else why it was not. When the commit itself fails, every write failed.
 */
export function applyBatch(db, writes) {
  const results = writes.map(() => null);
  const contexts = contextsOf(db);
  try {
    statement(db, "BEGIN IMMEDIATE").run();
    for (let i = 0; i < writes.length; i++) {
      statement(db, "SAVEPOINT arbor_write").run();
      const staged = [];
      try {
        for (const step of writes[i]) runStep(db, step, staged);
        // Later writes of the batch are stored over this one's calls: they commit together or not at all.
        for (const s of staged) {
          if (s.ctx === undefined) contexts.forget(s.programId);
          else contexts.set(s.programId, s.ctx);
        }
      } catch (e) {
        statement(db, "ROLLBACK TO arbor_write").run();
        results[i] = messageOf(e);
      }
      statement(db, "RELEASE arbor_write").run();
    }
    statement(db, "COMMIT").run();
    return results;
  } catch (e) {
    // Nothing of the batch is stored: no call may be stored over one of its calls.
    contexts.clear();
    if (db.inTransaction) db.exec("ROLLBACK");
    const why = `store write failed: ${messageOf(e)}`;
    return writes.map(() => why);
  }
}

/** Open a writing connection with the store's settings. */
export function openWriter(path, synchronous) {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("foreign_keys = ON");
  db.pragma(`synchronous = ${synchronous === "normal" ? "NORMAL" : "FULL"}`);
  db.pragma("busy_timeout = 5000");
  return db;
}

// As a worker: one connection, batches in arrival order, results posted back by batch id.
if (!isMainThread && workerData && workerData.arborSqliteWriter) {
  const { path, synchronous } = workerData.arborSqliteWriter;
  const db = openWriter(path, synchronous);
  parentPort.on("message", (msg) => {
    if (msg.close) {
      db.close();
      parentPort.postMessage({ closed: true });
      parentPort.close();
      return;
    }
    parentPort.postMessage({ id: msg.id, results: applyBatch(db, msg.writes) });
  });
  parentPort.postMessage({ ready: true });
}
