// A fixed pool of llama.cpp sequences with a bounded first-come-first-served waiting line. A
// request holds one sequence from prefill to its last token; when all are busy it waits, and when
// the line is full it is refused at once (the HTTP layer answers 429).
import { ArborError, CapacityError } from "../core/errors.js";

/** A sequence lent to one request; `release()` is idempotent. */
export interface Lease<T> {
  readonly item: T;
  release(): void;
}

interface Waiter<T> {
  resolve: (lease: Lease<T>) => void;
  reject: (err: Error) => void;
  detach: () => void;
}

/** Raised to a waiter whose request was aborted before a sequence became free. */
export class AbortedError extends ArborError {
  constructor(what = "request") {
    super(`${what} was aborted`, "aborted");
  }
}

/** Bounded FCFS pool of interchangeable items (the sequences of one context). */
export class SequencePool<T> {
  /** Total number of items. */
  readonly size: number;
  private readonly free: T[];
  private readonly waiters: Waiter<T>[] = [];

  constructor(
    items: readonly T[],
    /** How many requests may wait for an item; one more is refused with {@link CapacityError}. */
    readonly maxWaiting: number,
  ) {
    if (items.length === 0) throw new RangeError("a sequence pool needs at least one item");
    if (!Number.isInteger(maxWaiting) || maxWaiting < 0) throw new RangeError(`maxWaiting must be an integer >= 0, got ${maxWaiting}`);
    this.free = [...items];
    this.size = items.length;
  }

  /** Items currently lent out. */
  get running(): number {
    return this.size - this.free.length;
  }

  /** Requests waiting for an item. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Take a free item, or wait in line for one. Rejects with {@link CapacityError} when the line is
   * full and with {@link AbortedError} when `signal` aborts while waiting.
   */
  acquire(signal?: AbortSignal): Promise<Lease<T>> {
    if (signal?.aborted) return Promise.reject(new AbortedError());
    const item = this.free.shift();
    if (item !== undefined) return Promise.resolve(this.lease(item));
    if (this.waiters.length >= this.maxWaiting) {
      return Promise.reject(new CapacityError("engine waiting queue", this.maxWaiting));
    }
    return new Promise<Lease<T>>((resolve, reject) => {
      const onAbort = (): void => {
        const at = this.waiters.indexOf(waiter);
        if (at >= 0) this.waiters.splice(at, 1);
        reject(new AbortedError());
      };
      const waiter: Waiter<T> = {
        resolve,
        reject,
        detach: () => signal?.removeEventListener("abort", onAbort),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Fail every waiter (used when the engine shuts down). */
  rejectWaiting(err: Error): void {
    for (const w of this.waiters.splice(0)) {
      w.detach();
      w.reject(err);
    }
  }

  private lease(item: T): Lease<T> {
    let released = false;
    return {
      item,
      release: () => {
        if (released) return;
        released = true;
        const next = this.waiters.shift();
        if (next) {
          next.detach();
          next.resolve(this.lease(item));
        } else {
          this.free.push(item);
        }
      },
    };
  }
}
