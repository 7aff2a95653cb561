// The Postgres store's write queue: writes wait here (bounded) and are committed in batches, one
// transaction per batch and one savepoint per write, on one pooled connection at a time, so the
// writes of one store object apply in the order they were made, a refused write leaves nothing
// behind and does not fail the others, and a batch costs one commit (one WAL flush) however many
// calls it holds. A batch that lost a deadlock or serialization race is retried (bounded).
import pg from "pg";
import type { Pool, PoolClient } from "pg";
import { ArborError } from "../core/errors.js";

/** One write: its statements and checks on the batch's connection (inside a savepoint). */
export type PgWrite = (client: PoolClient) => Promise<void>;

/** Thrown by a write's checks: the write is refused with this message; the batch goes on. */
export class Refused extends Error {}

export interface PgWriteQueueOptions {
  /** Writes queued or being committed at most; one more is refused at once (default 10000). */
  maxPendingWrites?: number;
  /** Writes committed in one transaction at most (default 512). */
  maxBatchWrites?: number;
  /** Attempts of a batch that lost a deadlock or serialization race (default 3). */
  maxBatchAttempts?: number;
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
   * its connection broke before COMMIT was sent (nothing was committed, e.g. a server restart
   * between batches); a connection lost during COMMIT leaves the outcome unknown and fails the
   * batch saying so (a retried recordCall is then safe: identical retries are no-ops).
   */
  private async apply(batch: Pending[]): Promise<(ArborError | undefined)[]> {
    for (let attempt = 1; ; attempt++) {
      let client: PoolClient;
      try {
        client = await this.pool.connect();
      } catch (e) {
        return batch.map((w) => this.error(w, new Error(`cannot connect: ${messageOf(e)}`)));
      }
      const results: (ArborError | undefined)[] = [];
      let committing = false;
      try {
        await client.query("BEGIN");
        for (const w of batch) {
          await client.query("SAVEPOINT arbor_write");
          try {
            await w.fn(client);
            results.push(undefined);
          } catch (e) {
            // A refusal or a failed statement voids this write only; a lost race or a broken
            // connection voids the transaction, handled below for the whole batch.
            const state = sqlState(e);
            if (!(e instanceof Refused) && (state === undefined || RETRYABLE.has(state) || connectionLost(e))) throw e;
            await client.query("ROLLBACK TO SAVEPOINT arbor_write");
            results.push(this.error(w, e));
          }
          await client.query("RELEASE SAVEPOINT arbor_write");
        }
        committing = true;
        await client.query("COMMIT");
        client.release();
        return results;
      } catch (e) {
        const rolledBack = await client.query("ROLLBACK").then(
          () => true,
          () => false,
        );
        // A connection that could not even roll back is destroyed rather than reused.
        client.release(rolledBack ? undefined : (e as Error));
        const state = sqlState(e);
        const again = (state !== undefined && RETRYABLE.has(state)) || (connectionLost(e) && !committing);
        if (again && attempt < this.maxAttempts) continue;
        let why = e;
        if (again) why = new Error(`${messageOf(e)} (after ${attempt} attempts)`);
        else if (committing && connectionLost(e)) why = new Error(`connection lost during COMMIT, the writes may or may not be committed: ${messageOf(e)}`);
        return batch.map((w) => this.error(w, why));
      }
    }
  }
}
