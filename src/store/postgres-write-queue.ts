// The Postgres store's write queue: writes wait here (bounded) and are committed in batches, one
// transaction per batch on one pooled connection at a time, so the writes of one store object apply in
// the order they were made, and a batch costs one commit (one WAL flush) however many calls it holds.
// A refused write leaves nothing behind and does not fail the others: a batch in which a write fails
// runs again with a savepoint around each write (only then: a savepoint costs two round trips). A
// batch that lost a deadlock or serialization race is retried (bounded). A lost connection (a server
// restart, a network cut) is ridden out for a bounded time: the batch waits for the server to answer
// again, and a batch whose COMMIT was cut off asks the server whether its transaction committed
// (txid_status) instead of guessing, so no write is lost or made twice.
import pg from "pg";
import type { Pool, PoolClient } from "pg";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";

/** One write: its statements and checks on the batch's connection (inside a savepoint). */
export type PgWrite = (client: PoolClient) => Promise<void>;

/** Thrown by a write's checks: the write is refused with this message; the batch goes on. */
export class Refused extends Error {}

/** A write of a batch run without savepoints failed: the batch is run again with one around each write. */
class IsolateWrites extends Error {}

export interface PgWriteQueueOptions {
  /** Writes queued or being committed at most; one more is refused at once (default 10000). */
  maxPendingWrites?: number;
  /** Writes committed in one transaction at most (default 512). */
  maxBatchWrites?: number;
  /** Attempts of a batch that lost a deadlock or serialization race, or its connection mid-batch (default 3). */
  maxBatchAttempts?: number;
  /**
   * How long a batch or a read keeps trying to reach the server after its connection was lost or
   * refused, ms, before it fails naming the store (default 30000). Connecting again does not count
   * as an attempt: an outage shorter than this loses nothing.
   */
  reconnectMs?: number;
  /** Times the waits between reconnection tries (default: the wall clock). */
  clock?: Clock;
}

interface Pending {
  op: string;
  fn: PgWrite;
  resolve: () => void;
  reject: (e: Error) => void;
}

// SQLSTATEs after which the whole transaction is void but may succeed when run again.
const RETRYABLE = new Set(["40001", "40P01"]);

function sqlState(e: unknown): string | undefined {
  return e instanceof pg.DatabaseError ? e.code : undefined;
}

// Errors after which the connection is gone: the server ended it (class 08, admin shutdown,
// crash, restart) or the socket broke.
const CONNECTION_STATES = new Set(["57P01", "57P02", "57P03"]);
const SOCKET_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT", "ENOTCONN"]);

/** Whether `e` says the connection was lost (so nothing more can run on it). */
export function connectionLost(e: unknown): boolean {
  const state = sqlState(e);
  if (state !== undefined) return state.startsWith("08") || CONNECTION_STATES.has(state);
  if (SOCKET_CODES.has((e as NodeJS.ErrnoException)?.code ?? "")) return true;
  return /Connection terminated|not queryable|Connection ended/i.test(messageOf(e));
}

/** A message for any error, including Node's AggregateError (both address families refused) whose message is empty. */
export function messageOf(e: unknown): string {
  if (e instanceof AggregateError && !e.message) return e.errors.map((x) => messageOf(x)).join("; ");
  return e instanceof Error ? e.message || e.name : String(e);
}

// Waits between reconnection tries: short first (a dropped idle connection reconnects at once), then
// at most a second apart so an outage's end is noticed soon.
export const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 1000;

/**
 * A pooled connection, trying again while the server cannot be reached until `deadline` (clock time)
 * has passed; then throws an Error saying for how long it tried and why the last try failed.
 */
export async function connectUntil(pool: Pool, clock: Clock, deadline: number): Promise<PoolClient> {
  const started = clock.now();
  for (let wait = FIRST_BACKOFF_MS; ; wait = Math.min(2 * wait, MAX_BACKOFF_MS)) {
    try {
      return await pool.connect();
    } catch (e) {
      const now = clock.now();
      if (now >= deadline) {
        const tried = now > started ? ` (tried for ${Math.round(now - started)} ms)` : "";
        throw new Error(`cannot connect${tried}: ${messageOf(e)}`, { cause: e });
      }
      await clock.sleep(Math.min(wait, deadline - now));
    }
  }
}

function positiveInt(v: number | undefined, fallback: number, field: string): number {
  if (v === undefined) return fallback;
  if (!Number.isInteger(v) || v < 1) throw new ArborError(`${field}: must be an integer >= 1, got ${v}`, "config");
  return v;
}

/** Bounded FIFO of writes, committed in batches through `pool`. */
export class PgWriteQueue {
  private readonly maxPending: number;
  private readonly maxBatch: number;
  private readonly maxAttempts: number;
  private readonly reconnectMs: number;
  private readonly clock: Clock;
  private readonly queue: Pending[] = [];
  private pending = 0;
  private draining = false;
  private tail: Promise<void> = Promise.resolve();

  /** `label` names the store in every error (url without password, and schema). */
  constructor(
    private readonly pool: Pool,
    private readonly label: string,
    opts: PgWriteQueueOptions = {},
  ) {
    this.maxPending = positiveInt(opts.maxPendingWrites, 10_000, "maxPendingWrites");
    this.maxBatch = positiveInt(opts.maxBatchWrites, 512, "maxBatchWrites");
    this.maxAttempts = positiveInt(opts.maxBatchAttempts, 3, "maxBatchAttempts");
    this.reconnectMs = opts.reconnectMs ?? 30_000;
    if (!Number.isInteger(this.reconnectMs) || this.reconnectMs < 0) {
      throw new ArborError(`reconnectMs: must be an integer >= 0, got ${opts.reconnectMs}`, "config");
    }
    this.clock = opts.clock ?? realClock;
  }

  /** Queue a write; resolves once its batch has committed, rejects with why it was not made. */
  write(op: string, fn: PgWrite): Promise<void> {
    if (this.pending >= this.maxPending) {
      return Promise.reject(
        new ArborError(`${this.label}: ${op}: write queue is full (maxPendingWrites ${this.maxPending} writes waiting to commit)`, "capacity"),
      );
    }
    this.pending++;
    const done = new Promise<void>((resolve, reject) => this.queue.push({ op, fn, resolve, reject }));
    this.tail = done.then(
      () => undefined,
      () => undefined,
    );
    // Writes made in the same turn join one batch: the drain starts once this turn is over.
    if (!this.draining) {
      this.draining = true;
      queueMicrotask(() => void this.drain());
    }
    return done;
  }

  /** Resolves once every write queued before this call has settled. */
  settled(): Promise<void> {
    return this.tail;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        const results = await this.apply(batch);
        batch.forEach((w, i) => {
          this.pending--;
          const err = results[i];
          if (err) w.reject(err);
          else w.resolve();
        });
      }
    } finally {
      this.draining = false;
    }
  }

  private error(w: Pending, e: unknown): ArborError {
    if (e instanceof Refused) return new ArborError(`${this.label}: ${e.message}`, "store");
    return new ArborError(`${this.label}: ${w.op}: ${messageOf(e)}`, "store");
  }

  /**
   * Apply one batch; one entry per write: undefined when committed, else why not. A batch is run
   * again (at most maxBatchAttempts times) when it lost a deadlock or serialization race, or when
   * its connection broke before COMMIT was sent (nothing was committed). Reaching the server again
   * is tried for up to reconnectMs and is not an attempt. A connection lost during COMMIT leaves
   * the outcome to the server: the batch's transaction id is looked up (txid_status) on a new
   * connection — committed: done; aborted: run again; still in progress: asked again.
   */
  private async apply(batch: Pending[]): Promise<(ArborError | undefined)[]> {
    let lostAt: number | undefined;
    // Writes run one after the other in the transaction without savepoints (SAVEPOINT and RELEASE: two round trips a
    // write) until one of them fails; then the batch runs again with one around each, so that a failure undoes only
    // its own write.
    let isolated = false;
    for (let attempt = 1; ; attempt++) {
      let client: PoolClient;
      try {
        client = await connectUntil(this.pool, this.clock, (lostAt ?? this.clock.now()) + this.reconnectMs);
      } catch (e) {
        return batch.map((w) => this.error(w, e));
      }
      const results: (ArborError | undefined)[] = [];
      let committing = false;
      let xid: string | undefined;
      try {
        // The transaction id, known before COMMIT so that a COMMIT whose answer is lost can be looked up afterwards,
        // asked with BEGIN in one round trip (two statements, one simple query: an array of two results). Also
        // proves the connection alive: a pooled one that died idle fails here, before any write ran.
        const begun = (await client.query("BEGIN; SELECT txid_current()::text AS xid")) as unknown as pg.QueryResult<{ xid: string }>[];
        xid = begun[1]?.rows[0]?.xid;
        let voided = false;
        for (const w of batch) {
          if (isolated) await client.query("SAVEPOINT arbor_write");
          try {
            await w.fn(client);
            results.push(undefined);
          } catch (e) {
            // A refusal or a failed statement voids this write only; a lost race or a broken
            // connection voids the transaction, handled below for the whole batch.
            const state = sqlState(e);
            if (!(e instanceof Refused) && (state === undefined || RETRYABLE.has(state) || connectionLost(e))) throw e;
            if (!isolated && batch.length > 1) throw new IsolateWrites();
            if (isolated) await client.query("ROLLBACK TO SAVEPOINT arbor_write");
            else voided = true;
            results.push(this.error(w, e));
          }
          if (isolated) await client.query("RELEASE SAVEPOINT arbor_write");
        }
        committing = !voided;
        await client.query(voided ? "ROLLBACK" : "COMMIT");
        client.release();
        return results;
      } catch (e) {
        if (e instanceof IsolateWrites) {
          // Run again with a savepoint around each write; not an attempt (nothing went wrong with the server).
          const failed = await client.query("ROLLBACK").then(
            () => undefined,
            (e2: unknown) => e2 as Error,
          );
          client.release(failed);
          isolated = true;
          attempt--;
          continue;
        }
        const lost = connectionLost(e);
        const rolledBack = lost
          ? false
          : await client.query("ROLLBACK").then(
              () => true,
              () => false,
            );
        // A connection that could not even roll back is destroyed rather than reused.
        client.release(rolledBack ? undefined : (e as Error));
        if (lost) lostAt ??= this.clock.now();
        if (committing && lost && xid !== undefined) {
          let outcome: string;
          try {
            outcome = await this.outcomeOf(xid, lostAt ?? this.clock.now());
          } catch (e2) {
            const why = new Error(`connection lost during COMMIT, the writes may or may not be committed: ${messageOf(e)}; then ${messageOf(e2)}`);
            return batch.map((w) => this.error(w, why));
          }
          if (outcome === "committed") return results;
          // Aborted: nothing of the batch was made; it is run again below like a batch cut off before COMMIT.
        }
        if (lost && xid === undefined && this.clock.now() < (lostAt ?? 0) + this.reconnectMs) {
          // Dead before the batch began (an idle pooled connection the cut killed): reaching the
          // server again is not an attempt of the batch.
          attempt--;
          await this.clock.sleep(FIRST_BACKOFF_MS);
          continue;
        }
        const state = sqlState(e);
        const again = (state !== undefined && RETRYABLE.has(state)) || lost;
        if (again && attempt < this.maxAttempts) continue;
        const why = again ? new Error(`${messageOf(e)} (after ${attempt} attempts)`) : e;
        return batch.map((w) => this.error(w, why));
      }
    }
  }

  /**
   * Whether transaction `xid` committed, asked on a new connection: "committed" or "aborted"; waits
   * while it is still in progress (the server has not yet noticed its client is gone), until
   * reconnectMs after `lostAt`. Throws when the server cannot say.
   */
  private async outcomeOf(xid: string, lostAt: number): Promise<string> {
    const deadline = lostAt + this.reconnectMs;
    for (let wait = FIRST_BACKOFF_MS; ; wait = Math.min(2 * wait, MAX_BACKOFF_MS)) {
      const client = await connectUntil(this.pool, this.clock, deadline);
      let status: string | null | undefined;
      try {
        status = (await client.query<{ s: string | null }>("SELECT txid_status($1::bigint) AS s", [xid])).rows[0]?.s;
        client.release();
      } catch (e) {
        client.release(e as Error);
        if (!connectionLost(e) || this.clock.now() >= deadline) throw new Error(`cannot look up transaction ${xid}: ${messageOf(e)}`, { cause: e });
        continue;
      }
      if (status === "committed" || status === "aborted") return status;
      if (status !== "in progress") throw new Error(`transaction ${xid}: the server no longer knows its status (${String(status)})`);
      const now = this.clock.now();
      if (now >= deadline) throw new Error(`transaction ${xid} still in progress after ${this.reconnectMs} ms (reconnectMs)`);
      await this.clock.sleep(Math.min(wait, deadline - now));
    }
  }
}
