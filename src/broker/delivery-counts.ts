// How many times this client has been handed each message of a JetStream queue, keyed by stream sequence. A
// worker needs the true delivery number to know when it holds the last delivery (a nak there dead-letters).
// nats-server 2.9 (Debian's 2.9.10) sometimes numbers a pull consumer's redelivery 1 in its ack subject while it
// counts that delivery toward max_deliver (its max-deliveries advisory then says 3, not 1); counting what this
// client saw keeps the number right for redeliveries that come back here, and the server's max_deliver with its
// advisory still bounds a message redelivered to other clients. The other way round, a number is never past
// max_deliver: when a delivery fails (its pull request expired), the server takes the count back (nats-server
// `didNotDeliver`) and may send a number this client has seen again; counting one past it would tell a handler
// "delivery 4 of 3" (seen once in CI: [1, 3, 4]), so the last delivery is numbered max_deliver, as often as it comes.
import { ArborError } from "../core/errors.js";

/**
 * Per-message delivery counts as seen by one client, at most `capacity` messages (oldest forgotten first), each
 * at most `maxDeliver`.
 */
export class DeliveryCounts {
  private readonly seen = new Map<number, number>();

  constructor(
    private readonly capacity: number,
    private readonly maxDeliver: number,
  ) {
    if (!(Number.isInteger(capacity) && capacity >= 1)) {
      throw new ArborError(`delivery counts: capacity must be an integer >= 1, got ${capacity}`, "config");
    }
    if (!(Number.isInteger(maxDeliver) && maxDeliver >= 1)) {
      throw new ArborError(`delivery counts: maxDeliver must be an integer >= 1, got ${maxDeliver}`, "config");
    }
  }

  /** Messages remembered now. */
  get size(): number {
    return this.seen.size;
  }

  /**
   * Records one delivery of message `streamSeq` that the server numbered `reported`; returns its number: the
   * larger of `reported` and one past the last number this client saw for the message, at most maxDeliver.
   */
  delivered(streamSeq: number, reported: number): number {
    const before = this.seen.get(streamSeq);
    const n = Math.min(this.maxDeliver, before === undefined ? reported : Math.max(reported, before + 1));
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
