// The trainer-facing batch queue: bounded, FIFO, at-least-once. A batch handed to a trainer stays "in flight"
// until acknowledged; a negative acknowledgement puts it back at the head, so a trainer crash never loses one.
import { ArborError, CapacityError } from "../core/errors.js";

/** One queued batch: its serialised bytes plus what stats report. */
export interface QueuedBatch {
  id: string;
  bytes: Uint8Array;
  samples: number;
  flatTokens: number;
  treeTokens: number;
}

/** Counters of the queue. */
export interface BatchQueueStats {
  capacity: number;
  queued: number;
  inFlight: number;
  enqueued: number;
  delivered: number;
  acked: number;
  requeued: number;
  /** Sum over acked batches. */
  ackedFlatTokens: number;
  ackedTreeTokens: number;
}

/** A bounded FIFO of batches with in-flight tracking; capacity counts queued plus in-flight batches. */
export class BatchQueue {
  private readonly queue: QueuedBatch[] = [];
  private readonly inFlight = new Map<string, QueuedBatch>();
  private readonly ids = new Set<string>();
  private counts = { enqueued: 0, delivered: 0, acked: 0, requeued: 0, ackedFlatTokens: 0, ackedTreeTokens: 0 };

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new ArborError(`batch queue: capacity must be an integer >= 1, got ${capacity}`, "config");
  }

  /** Add a batch; throws {@link CapacityError} when full, an {@link ArborError} on a duplicate id. */
  push(batch: QueuedBatch): void {
    if (this.ids.has(batch.id)) throw new ArborError(`batch queue: batch '${batch.id}' is already queued or in flight`, "batch");
    if (this.queue.length + this.inFlight.size >= this.capacity) throw new CapacityError("trainer batch queue", this.capacity);
    this.queue.push(batch);
    this.ids.add(batch.id);
    this.counts.enqueued++;
  }

  /** Hand out the oldest batch (now in flight), or undefined when none is queued. */
  next(): QueuedBatch | undefined {
    const b = this.queue.shift();
    if (!b) return undefined;
    this.inFlight.set(b.id, b);
    this.counts.delivered++;
    return b;
  }

  /** Acknowledge a delivered batch: it is done. Throws when `id` is not in flight. */
  ack(id: string): void {
    const b = this.take(id);
    this.ids.delete(id);
    this.counts.acked++;
    this.counts.ackedFlatTokens += b.flatTokens;
    this.counts.ackedTreeTokens += b.treeTokens;
  }

  /** Give a delivered batch back: it goes to the head of the queue. Throws when `id` is not in flight. */
  requeue(id: string): void {
    this.queue.unshift(this.take(id));
    this.counts.requeued++;
  }

  /** Take a batch out, queued or in flight (its ack or requeue is then refused as unknown); false when it is neither. */
  withdraw(id: string): boolean {
    const at = this.queue.findIndex((b) => b.id === id);
    if (at >= 0) this.queue.splice(at, 1);
    else if (!this.inFlight.delete(id)) return false;
    this.ids.delete(id);
    return true;
  }

  /** The ids of the batches in flight, in the order they were handed out. */
  inFlightIds(): string[] {
    return [...this.inFlight.keys()];
  }

  stats(): BatchQueueStats {
    return { capacity: this.capacity, queued: this.queue.length, inFlight: this.inFlight.size, ...this.counts };
  }

  private take(id: string): QueuedBatch {
    const b = this.inFlight.get(id);
    if (!b) throw new ArborError(`batch queue: batch '${id}' is not in flight`, "not_found");
    this.inFlight.delete(id);
    return b;
  }
}
