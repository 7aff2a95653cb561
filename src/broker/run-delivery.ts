// One delivery's life, shared by every WorkQueue implementation so they settle messages the same way: the
// handler's message can be settled once; returning unsettled acks, throwing naks (or dead-letters on the last
// delivery); a nak on the last delivery dead-letters; after the consumer is abandoned nothing is settled.
import { ArborError } from "../core/errors.js";
import type { WorkHandler, WorkMessage } from "./work-queue.js";

/** What an implementation can do with one delivered message. */
export interface Delivery<T> {
  id: string;
  payload: T;
  delivery: number;
  maxDeliver: number;
  ack(): Promise<void>;
  nak(delayMs: number): Promise<void>;
  working(): Promise<void>;
  term(reason: string): Promise<void>;
  /** Publish the dead letter with `reason` and remove the message so it is not delivered again. */
  deadLetter(reason: string): Promise<void>;
}

/**
 * Runs `handler` on one delivery and settles it. Resolves when the delivery is settled (or abandoned); rejects
 * only when settling failed or the handler threw after settling, so the caller can report it.
 */
export async function runDelivery<T>(
  queue: string,
  d: Delivery<T>,
  handler: WorkHandler<T>,
  abandoned: () => boolean,
): Promise<void> {
  let settled = false;
  const settle = async (what: string, op: () => Promise<void>): Promise<void> => {
    if (abandoned()) return;
    if (settled) {
      throw new ArborError(`work queue ${queue}: message ${d.id} is already settled; cannot ${what} it`, "broker_settled");
    }
    settled = true;
    await op();
  };
  const last = d.delivery >= d.maxDeliver;
  const message: WorkMessage<T> = {
    id: d.id,
    payload: d.payload,
    delivery: d.delivery,
    maxDeliver: d.maxDeliver,
    ack: () => settle("ack", () => d.ack()),
    nak: (delayMs = 0) =>
      settle("nak", () =>
        last ? d.deadLetter(`nak on the last delivery (${d.delivery} of ${d.maxDeliver})`) : d.nak(Math.max(0, delayMs)),
      ),
    inProgress: async () => {
      if (abandoned() || settled) return;
      await d.working();
    },
    term: (reason) => settle("term", () => d.term(reason)),
  };
  let failure: unknown;
  let threw = false;
  try {
    await handler(message);
  } catch (error) {
    threw = true;
    failure = error;
  }
  if (abandoned()) return;
  if (!threw) {
    if (!settled) await settle("ack", () => d.ack());
    return;
  }
  const text = failure instanceof Error ? failure.message : String(failure);
  if (settled) {
    // A second settle's own error (broker_settled) keeps its code.
    if (failure instanceof ArborError && failure.code === "broker_settled") throw failure;
    throw new ArborError(`work queue ${queue}: handler of message ${d.id} threw after settling it: ${text}`, "broker_handler");
  }
  await settle("nak", () =>
    last ? d.deadLetter(`handler failed on the last delivery (${d.delivery} of ${d.maxDeliver}): ${text}`) : d.nak(0),
  );
}
