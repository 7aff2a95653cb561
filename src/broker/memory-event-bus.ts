// The EventBus in process (embedded mode, simulator): a bounded log shared by its subscribers, each reading it
// with its own cursor, so a slow subscriber holds no queue of its own and learns when it fell off the log.
import { ArborError } from "../core/errors.js";
import { checkTopic, type BusEvent, type EventBus, type EventMap, type EventSubscription, type SubscribeOptions } from "./event-bus.js";

interface Reader {
  topic: string;
  next: number;
  closed: boolean;
  running: boolean;
  handler: (event: BusEvent<unknown>) => void | Promise<void>;
  onError?: (error: Error) => void;
  idle: Promise<void>;
}

export interface MemoryEventBusOptions {
  /** Events kept (oldest dropped first); default 10,000. */
  maxEvents?: number;
  /** Publishes kept for de-duplication by id (oldest forgotten first); default 10,000. */
  dedupIds?: number;
}

/** In-process {@link EventBus}. */
export class MemoryEventBus<M extends EventMap> implements EventBus<M> {
  private readonly log: BusEvent<unknown>[] = [];
  private readonly ids = new Map<string, number>();
  private readonly readers = new Set<Reader>();
  private nextSeq = 1;
  private readonly maxEvents: number;
  private readonly dedupIds: number;

  constructor(
    readonly name: string,
    options: MemoryEventBusOptions = {},
  ) {
    this.maxEvents = options.maxEvents ?? 10_000;
    this.dedupIds = options.dedupIds ?? 10_000;
  }

  async publish<K extends keyof M & string>(topic: K, data: M[K], id: string): Promise<{ seq: number; duplicate: boolean }> {
    checkTopic(this.name, topic);
    const known = this.ids.get(id);
    if (known !== undefined) return { seq: known, duplicate: true };
    const event: BusEvent<unknown> = { topic, seq: this.nextSeq++, id, data: structuredClone(data) };
    this.ids.set(id, event.seq);
    if (this.ids.size > this.dedupIds) this.ids.delete(this.ids.keys().next().value as string);
    this.log.push(event);
    if (this.log.length > this.maxEvents) this.log.shift();
    for (const r of this.readers) this.pump(r);
    return { seq: event.seq, duplicate: false };
  }

  async subscribe<K extends keyof M & string>(
    topic: K,
    handler: (event: BusEvent<M[K]>) => void | Promise<void>,
    options: SubscribeOptions,
  ): Promise<EventSubscription> {
    checkTopic(this.name, topic);
    const replay = options.replay;
    const next = replay === "all" ? 1 : replay === "new" ? this.nextSeq : replay.afterSeq + 1;
    const r: Reader = {
      topic,
      next,
      closed: false,
      running: false,
      handler: handler as Reader["handler"],
      onError: options.onError,
      idle: Promise.resolve(),
    };
    this.readers.add(r);
    this.pump(r);
    return {
      close: async () => {
        r.closed = true;
        this.readers.delete(r);
        await r.idle;
      },
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.readers].map(async (r) => {
      r.closed = true;
      this.readers.delete(r);
      await r.idle;
    }));
  }

  /** Delivers the reader's events from its cursor, one handler call at a time. */
  private pump(r: Reader): void {
    if (r.running || r.closed) return;
    r.running = true;
    r.idle = (async () => {
      try {
        for (;;) {
          if (r.closed) return;
          const first = this.log[0]?.seq ?? this.nextSeq;
          if (r.next < first) {
            r.onError?.(
              new ArborError(
                `event bus ${this.name}: subscriber of ${r.topic} missed events ${r.next}..${first - 1} (dropped from the log of ${this.maxEvents})`,
                "bus_events_dropped",
              ),
            );
            r.next = first;
          }
          // Seqs in the log are consecutive, so the cursor indexes it directly.
          let i = r.next - first;
          while (i < this.log.length && this.log[i]!.topic !== r.topic) i++;
          const event = this.log[i];
          if (!event) {
            r.next = this.nextSeq;
            return;
          }
          r.next = event.seq + 1;
          try {
            await r.handler(structuredClone(event));
          } catch (error) {
            r.onError?.(error instanceof Error ? error : new Error(String(error)));
          }
        }
      } finally {
        r.running = false;
      }
    })();
  }
}
