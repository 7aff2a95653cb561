// How many times this client has been handed each message of a JetStream queue, keyed by stream sequence. A
// worker needs the true delivery number to know when it holds the last delivery (a nak there dead-letters).
// nats-server 2.9 (Debian's 2.9.10) sometimes numbers a pull consumer's redelivery 1 in its ack subject while it
// counts that delivery toward max_deliver (its max-deliveries advisory then says 3, not 1); counting what this
// client saw keeps the number right for redeliveries that come back here, and the server's max_deliver with its
// advisory still bounds a message redelivered to other clients.
import { ArborError } from "../core/errors.js";

/** Per-message delivery counts as seen by one client, at most `capacity` messages (oldest forgotten first). */
export class DeliveryCounts {
  private readonly seen = new Map<number, number>();

  constructor(private readonly capacity: number) {
    if (!(Number.isInteger(capacity) && capacity >= 1)) {
      throw new ArborError(`delivery counts: capacity must be an integer >= 1, got ${capacity}`, "config");
    }
  }

  /** Messages remembered now. */
  get size(): number {
    return this.seen.size;
  }

  /**
   * Records one delivery of message `streamSeq` that the server numbered `reported`; returns its number: the
   * larger of `reported` and one past the last number this client saw for the message.
   */
  delivered(streamSeq: number, reported: number): number {
    const before = this.seen.get(streamSeq);
    const n = before === undefined ? reported : Math.max(reported, before + 1);
    // Re-inserting moves the message to the back, so the one evicted at the bound is the longest unseen.
    this.seen.delete(streamSeq);
    if (this.seen.size >= this.capacity) this.seen.delete(this.seen.keys().next().value as number);
    this.seen.set(streamSeq, n);
    return n;
  }

  /** The message was acked, termed or dead-lettered: it will not come back. */
  settled(streamSeq: number): void {
    this.seen.delete(streamSeq);
  }
}
