// The SQLite store's write queue: writes wait here (bounded) and are committed in batches, one
// transaction per batch, by the writer (sqlite-writer.mjs) in a worker thread for a file store, so
// a commit's fsync runs off the thread that serves requests. Each write's promise resolves only
// once its batch has committed (durable at the store's synchronous level) and rejects with why
// it was refused; batches commit in enqueue order, so writes of one caller apply in order.
import { Worker } from "node:worker_threads";
import type Database from "better-sqlite3";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { applyBatch, type WriteStep } from "./sqlite-writer.mjs";

export interface WriteQueueOptions {
  /** Writes queued or being committed at most; one more is refused at once (default 10000). */
  maxPendingWrites?: number;
  /** Writes committed in one transaction at most (default 512). */
  maxBatchWrites?: number;
  /**
   * How long the first write of a batch waits for others to join it, ms (default 2 for a file store,
   * 0 in process): fewer, larger transactions and fewer wake-ups of the writer thread (which would
   * otherwise take CPU from the serving thread on every call), for at most this much later
   * durability. 0: the next turn of the event loop.
   */
  flushDelayMs?: number;
}

interface Pending {
  steps: WriteStep[];
  resolve: () => void;
  reject: (e: Error) => void;
}

/** Where batches are applied: a worker thread with its own connection, or a connection in process. */
type Target = { kind: "worker"; worker: Worker } | { kind: "inline"; db: Database.Database };

const noop = (): void => undefined;

/** Bounded FIFO of guarded writes, committed in batches. */
export class SqliteWriteQueue {
  private readonly target: Target;
  private readonly maxPending: number;
  private readonly maxBatch: number;
  private readonly flushDelayMs: number;
  private readonly queue: Pending[] = [];
  private inFlight: Pending[] = [];
  private pending = 0;
  private scheduled = false;
  private nextBatchId = 0;
  private tail: Promise<void> = Promise.resolve();
  private broken: Error | undefined;
  private closing: Promise<void> | undefined;

  /**
   * Commit through a worker thread writing `path` (a file store), or, with `inline`, through that
   * connection on this thread (a `:memory:` store has no file another connection could open).
   */
  constructor(
    readonly path: string,
    synchronous: "full" | "normal",
    opts: WriteQueueOptions & { inline?: Database.Database } = {},
  ) {
    this.maxPending = positiveInt(opts.maxPendingWrites ?? 10_000, "maxPendingWrites");
    this.maxBatch = positiveInt(opts.maxBatchWrites ?? 512, "maxBatchWrites");
    this.flushDelayMs = opts.flushDelayMs ?? (opts.inline ? 0 : 2);
    if (!(Number.isFinite(this.flushDelayMs) && this.flushDelayMs >= 0)) {
      throw new ArborError(`flushDelayMs: must be a number >= 0, got ${opts.flushDelayMs}`, "config");
    }
    if (opts.inline) {
      this.target = { kind: "inline", db: opts.inline };
      return;
    }
    const worker = new Worker(new URL("./sqlite-writer.mjs", import.meta.url), {
      workerData: { arborSqliteWriter: { path, synchronous } },
      // Plain JavaScript: none of the parent's flags (loaders, --input-type) apply to it.
      execArgv: [],
    });
    worker.on("message", (msg: { id?: number; results?: (string | null)[] }) => {
      if (msg.results !== undefined) this.settle(msg.results);
    });
    worker.on("error", (e) => this.fail(new ArborError(`store ${path}: writer thread failed: ${e.message}`, "store")));
    worker.on("exit", (code) => {
      if (!this.closing) this.fail(new ArborError(`store ${path}: writer thread exited (code ${code})`, "store"));
    });
    // Idle, the writer must not keep the process alive; with writes in flight it must.
    worker.unref();
    this.target = { kind: "worker", worker };
  }

  /** Queue one write; resolves when its transaction has committed, rejects with why it was refused. */
  write(steps: WriteStep[]): Promise<void> {
    if (this.closing) return Promise.reject(new ArborError(`store ${this.path} is closed`, "store"));
    if (this.broken) return Promise.reject(this.broken);
    if (this.pending >= this.maxPending) {
      return Promise.reject(
        new ArborError(
          `store ${this.path}: write queue is full (maxPendingWrites ${this.maxPending} writes waiting to commit); the disk is not keeping up with the writers`,
          "capacity",
        ),
      );
    }
    this.pending++;
    const done = new Promise<void>((resolve, reject) => this.queue.push({ steps, resolve, reject }));
    this.tail = done.then(noop, noop);
    this.schedule();
    return done;
  }

  /** Resolves when every write queued so far has settled (committed or refused). */
  settled(): Promise<void> {
    return this.tail;
  }

  /** Commit what is queued, stop the writer. Later writes are refused. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    await this.tail;
    if (this.target.kind !== "worker") return;
    const worker = this.target.worker;
    if (this.broken) {
      await worker.terminate();
      return;
    }
    worker.ref();
    await new Promise<void>((resolve) => {
      worker.once("exit", () => resolve());
      worker.postMessage({ close: true });
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight.length > 0) return;
    this.scheduled = true;
    // Writes that arrive meanwhile join the same transaction.
    const run = (): void => {
      this.scheduled = false;
      this.flush();
    };
    // The wall clock: this is I/O pacing, not logic a virtual clock should drive.
    if (this.flushDelayMs > 0 && this.queue.length < this.maxBatch) realClock.setTimer(this.flushDelayMs, run);
    else setImmediate(run);
  }

  private flush(): void {
    if (this.inFlight.length > 0 || this.queue.length === 0) return;
    this.inFlight = this.queue.splice(0, this.maxBatch);
    const writes = this.inFlight.map((p) => p.steps);
    if (this.target.kind === "inline") {
      this.settle(applyBatch(this.target.db, writes));
      return;
    }
    this.target.worker.ref();
    try {
      this.target.worker.postMessage({ id: this.nextBatchId++, writes });
    } catch (e) {
      // A write holding a value the writer thread cannot be sent (a function, say): it fails alone, the rest go
      // (thrown here, in a timer's callback, it would take down the process and leave the batch in flight forever).
      this.postCloneable(e);
    }
  }

  /** After the batch could not be posted: refuses its writes that cannot be cloned (naming why), posts the rest. */
  private postCloneable(batchError: unknown): void {
    const sendable: Pending[] = [];
    for (const p of this.inFlight) {
      try {
        structuredClone(p.steps);
        sendable.push(p);
      } catch (e) {
        this.pending--;
        p.reject(new ArborError(`store ${this.path}: a write cannot be sent to the writer thread: ${e instanceof Error ? e.message : String(e)}`, "store"));
      }
    }
    if (sendable.length === this.inFlight.length) {
      // Every write clones alone: the batch failed for another reason, which fails the writer.
      this.fail(new ArborError(`store ${this.path}: a batch cannot be sent to the writer thread: ${batchError instanceof Error ? batchError.message : String(batchError)}`, "store"));
      return;
    }
    this.inFlight = [];
    this.queue.unshift(...sendable);
    if (this.queue.length > 0) this.flush();
    else if (this.target.kind === "worker") this.target.worker.unref();
  }

  private settle(results: (string | null)[]): void {
    const batch = this.inFlight;
    this.inFlight = [];
    this.pending -= batch.length;
    if (this.target.kind === "worker" && this.queue.length === 0) this.target.worker.unref();
    batch.forEach((p, i) => {
      const why = results[i];
      if (why === null || why === undefined) p.resolve();
      else p.reject(new ArborError(why, "store"));
    });
    if (this.queue.length > 0) this.flush();
  }

  private fail(e: Error): void {
    if (this.broken) return;
    this.broken = e;
    const all = [...this.inFlight, ...this.queue.splice(0)];
    this.inFlight = [];
    this.pending = 0;
    for (const p of all) p.reject(e);
  }
}

function positiveInt(v: number, field: string): number {
  if (!(Number.isInteger(v) && v >= 1)) throw new ArborError(`${field}: must be an integer >= 1, got ${v}`, "config");
  return v;
}
