// Events between Arbor's parts when they run apart (issue 16): policy-version changes, completed groups. A bus
// keeps a bounded log per deployment, so a subscriber that starts late replays what it missed, in order.
// Implementations: JetStream (`jetstream-event-bus.ts`) and in process (`memory-event-bus.ts`); both pass
// `event-bus.contract.ts`.
import { ArborError } from "../core/errors.js";

/** Topic name → event payload. */
export type EventMap = Record<string, unknown>;

/** Arbor's events. */
export interface ArborEvents extends EventMap {
  /** The trainer published new weights: engines and the orchestrator's staleness bound move to `version`. */
  "policy-version": { version: number; checkpoint?: string };
  /** Every program of a group ended and was rewarded: the group can go into a batch. */
  "group-completed": { groupId: string; runId: string; taskId: string; programIds: string[] };
}

/** One event as a subscriber sees it. */
export interface BusEvent<T> {
  topic: string;
  /** Position in the bus's log (increasing across topics); pass it as `afterSeq` to resume after it. */
  seq: number;
  /** The publish id (de-duplication key). */
  id: string;
  data: T;
}

/** Where a subscription starts: the oldest event kept, only events published from now, or after a seq. */
export type Replay = "all" | "new" | { afterSeq: number };

export interface SubscribeOptions {
  replay: Replay;
  /** A handler that threw, or events the subscriber fell too far behind to receive (dropped from the log). */
  onError?: (error: Error) => void;
}

export interface EventSubscription {
  /** Stop: no handler call starts after this resolves. */
  close(): Promise<void>;
}

export interface EventBus<M extends EventMap> {
  /** Appends an event; a repeat of `id` within the bus's duplicate window is reported and ignored. */
  publish<K extends keyof M & string>(topic: K, data: M[K], id: string): Promise<{ seq: number; duplicate: boolean }>;
  /**
   * Calls `handler` for each event of `topic`, one at a time, in publish order. Resolves once the subscription
   * is in place: with replay "new", every event published after that is delivered.
   */
  subscribe<K extends keyof M & string>(
    topic: K,
    handler: (event: BusEvent<M[K]>) => void | Promise<void>,
    options: SubscribeOptions,
  ): Promise<EventSubscription>;
  close(): Promise<void>;
}

/** Topics become subject tokens, so they are limited to letters, digits, `-` and `_`; throws naming the topic. */
export function checkTopic(bus: string, topic: string): void {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(topic)) {
    throw new ArborError(`event bus ${bus}: topic ${JSON.stringify(topic)} must be 1-64 of [A-Za-z0-9_-]`, "config");
  }
}
