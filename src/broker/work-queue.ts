// The work stream of issue 16: programs to run (and later completed groups, batches) are messages that workers
// consume with explicit acks. A message not acked within the ack wait goes back to the queue; after `maxDeliver`
// deliveries it is dead-lettered (published with its id, delivery count and last error, and reported), never
// dropped silently. Publishing is de-duplicated by message id within a window. Implementations: JetStream
// (`jetstream-work-queue.ts`) and in-process on an injected Clock (`memory-work-queue.ts`); both pass
// `work-queue.contract.ts`.
import { ArborError } from "../core/errors.js";

/** One delivery of a message to a worker. Settle it once: `ack`, `nak` or `term`. */
export interface WorkMessage<T> {
  /** The id it was published with (the de-duplication key). */
  readonly id: string;
  readonly payload: T;
  /** 1 on the first delivery; above 1 on a redelivery, so a worker can resume or end the program. */
  readonly delivery: number;
  /** The queue's bound on deliveries: `delivery === maxDeliver` is the last chance. */
  readonly maxDeliver: number;
  /** Done: the message leaves the queue. */
  ack(): Promise<void>;
  /**
   * Not done: deliver again after `delayMs` (0 when absent). On the last delivery there is no next one, so the
   * message is dead-lettered instead, with reason "nak on the last delivery".
   */
  nak(delayMs?: number): Promise<void>;
  /** Still working: restart the ack wait (long programs call this more often than the ack wait). */
  inProgress(): Promise<void>;
  /** Ended on purpose with a recorded reason (e.g. the program's termination): removed, not redelivered. */
  term(reason: string): Promise<void>;
}

/**
 * Handles one delivery. Returning without settling acks the message; throwing naks it (the error becomes the
 * message's last error) or, on the last delivery, dead-letters it with that error.
 */
export type WorkHandler<T> = (message: WorkMessage<T>) => Promise<void>;

/** A message that used up its deliveries (or could not be read): published on the dead-letter subject. */
export interface DeadLetter<T> {
  id: string;
  /** Undefined when the payload could not be decoded. */
  payload: T | undefined;
  /** Deliveries made before it was given up. */
  deliveries: number;
  /** The last error: the handler's, a nak on the last delivery, or the ack wait running out. */
  reason: string;
}

export interface WorkQueueOptions<T> {
  /** A delivery not settled (or `inProgress`-extended) within this many ms is redelivered. */
  ackWaitMs: number;
  /** Deliveries before a message is dead-lettered (>= 1). */
  maxDeliver: number;
  /** A second publish of an id within this many ms of the first is a duplicate (no-op). */
  duplicateWindowMs: number;
  /** Messages waiting or in flight at most (publish beyond it fails); defaults to 100,000. */
  maxMessages?: number;
  /** Called once for each dead letter this queue client publishes. */
  onDeadLetter?: (deadLetter: DeadLetter<T>) => void;
}

export interface ConsumeOptions {
  /** At most this many deliveries are being handled by this consumer at once (>= 1). */
  maxInFlight: number;
  /** `close()` gives in-flight handlers this long before it rejects; defaults to 30 s. */
  drainTimeoutMs?: number;
  /** Errors the consumer cannot hand to a handler (broker unreachable, a settle that failed). */
  onError?: (error: Error) => void;
}

export interface PublishResult {
  /** True when the id was already published within the duplicate window: nothing was enqueued. */
  duplicate: boolean;
}

/** A running consumer: pulls while it has free in-flight slots. */
export interface WorkConsumer {
  /** Deliveries being handled now. */
  readonly inFlight: number;
  /** Stop pulling and wait for in-flight handlers to settle (bounded by `drainTimeoutMs`). */
  close(): Promise<void>;
  /**
   * Stop at once as a worker that died would: in-flight deliveries are left unsettled (later settle calls do
   * nothing) and go back to the queue when their ack wait runs out.
   */
  abandon(): Promise<void>;
}

/** A client of one work queue. Several clients (workers) may open the same queue. */
export interface WorkQueue<T> {
  readonly name: string;
  /** Enqueue `payload` under `id`; a repeat of `id` within the duplicate window is reported and ignored. */
  publish(id: string, payload: T): Promise<PublishResult>;
  consume(handler: WorkHandler<T>, options: ConsumeOptions): WorkConsumer;
  /** Every dead letter published for this queue so far (from any client), oldest first. */
  deadLetters(): Promise<DeadLetter<T>[]>;
  /** Close this client's consumers (draining them) and release its resources. */
  close(): Promise<void>;
}

/** Default bound on a queue's messages. */
export const DEFAULT_MAX_MESSAGES = 100_000;
/** Default time `close()` lets in-flight handlers finish. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;

/** Checks a consumer's options; throws naming the field. */
export function checkConsumeOptions(name: string, options: ConsumeOptions): void {
  if (!(Number.isInteger(options.maxInFlight) && options.maxInFlight >= 1)) {
    throw new ArborError(`work queue ${name}: maxInFlight must be an integer >= 1, got ${options.maxInFlight}`, "config");
  }
  const drain = options.drainTimeoutMs;
  if (drain !== undefined && !(Number.isFinite(drain) && drain > 0)) {
    throw new ArborError(`work queue ${name}: drainTimeoutMs must be > 0, got ${drain}`, "config");
  }
}

/** Checks options shared by the implementations; throws naming the field. */
export function checkWorkQueueOptions<T>(name: string, options: WorkQueueOptions<T>): void {
  const positive: [string, number][] = [
    ["ackWaitMs", options.ackWaitMs],
    ["duplicateWindowMs", options.duplicateWindowMs],
  ];
  for (const [field, value] of positive) {
    if (!(Number.isFinite(value) && value > 0)) {
      throw new ArborError(`work queue ${name}: ${field} must be > 0, got ${value}`, "config");
    }
  }
  const max = options.maxMessages;
  if (max !== undefined && !(Number.isInteger(max) && max >= 1)) {
    throw new ArborError(`work queue ${name}: maxMessages must be an integer >= 1, got ${max}`, "config");
  }
  if (!(Number.isInteger(options.maxDeliver) && options.maxDeliver >= 1)) {
    throw new ArborError(`work queue ${name}: maxDeliver must be an integer >= 1, got ${options.maxDeliver}`, "config");
  }
}
