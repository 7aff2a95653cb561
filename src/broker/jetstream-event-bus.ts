// The EventBus on NATS JetStream: one limits-retention stream per bus capturing `<prefix>.<topic>` (bounded by
// message count, oldest dropped), publish de-duplicated by `Nats-Msg-Id`, and each subscription an ordered
// consumer on its topic's subject, so a late subscriber replays from the stream and a reconnect resumes in order.
import { DeliverPolicy, DiscardPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type ConsumerMessages, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { connect, nanos, type NatsConnection } from "@nats-io/transport-node";
import { ArborError } from "../core/errors.js";
import { checkTopic, type BusEvent, type EventBus, type EventMap, type EventSubscription, type SubscribeOptions } from "./event-bus.js";

export interface JetStreamEventBusOptions {
  /** The stream's name. */
  stream: string;
  /** Subjects are `<prefix>.<topic>`; defaults to `arbor.events.<stream>`. */
  prefix?: string;
  /** Events kept (oldest dropped first); default 10,000. */
  maxEvents?: number;
  /** A repeat of a publish id within this many ms is a duplicate; default 120,000. */
  duplicateWindowMs?: number;
}

const MSG_ID = "Nats-Msg-Id";

/** {@link EventBus} on NATS JetStream. */
export class JetStreamEventBus<M extends EventMap> implements EventBus<M> {
  private readonly subscriptions = new Set<EventSubscription>();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly prefix: string,
  ) {}

  /** Connects to `servers` (closed again by `close()`) and opens the bus. */
  static async connect<M extends EventMap>(servers: string | string[], options: JetStreamEventBusOptions): Promise<JetStreamEventBus<M>> {
    let nc: NatsConnection;
    try {
      nc = await connect({ servers, timeout: 5000, maxReconnectAttempts: 10 });
    } catch (error) {
      throw new ArborError(`event bus ${options.stream}: cannot reach NATS at ${String(servers)}: ${describe(error)}`, "broker_unreachable");
    }
    try {
      return await JetStreamEventBus.open<M>(nc, options, true);
    } catch (error) {
      await nc.close();
      throw error;
    }
  }

  /** Opens the bus on an existing connection, creating its stream where missing. */
  static async open<M extends EventMap>(nc: NatsConnection, options: JetStreamEventBusOptions, ownsConnection = false): Promise<JetStreamEventBus<M>> {
    const prefix = options.prefix ?? `arbor.events.${options.stream}`;
    const jsm: JetStreamManager = await jetstreamManager(nc);
    const config = {
      name: options.stream,
      subjects: [`${prefix}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      max_msgs: options.maxEvents ?? 10_000,
      discard: DiscardPolicy.Old,
      duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
    };
    const exists = await jsm.streams.info(options.stream).then(
      () => true,
      (error: unknown) => {
        if (/not found/i.test(describe(error))) return false;
        throw new ArborError(`event bus ${options.stream}: cannot read its stream: ${describe(error)}`, "broker_setup");
      },
    );
    if (!exists) {
      await jsm.streams.add(config).catch((error: unknown) => {
        throw new ArborError(`event bus ${options.stream}: cannot create its stream: ${describe(error)}`, "broker_setup");
      });
    }
    return new JetStreamEventBus<M>(nc, ownsConnection, jetstream(nc), jsm, options.stream, prefix);
  }

  async publish<K extends keyof M & string>(topic: K, data: M[K], id: string): Promise<{ seq: number; duplicate: boolean }> {
    checkTopic(this.stream, topic);
    try {
      const ack = await this.js.publish(`${this.prefix}.${topic}`, JSON.stringify(data), { msgID: id });
      return { seq: ack.seq, duplicate: ack.duplicate };
    } catch (error) {
      throw new ArborError(`event bus ${this.stream}: publish of ${topic} ${id} failed: ${describe(error)}`, "broker_publish");
    }
  }

  async subscribe<K extends keyof M & string>(
    topic: K,
    handler: (event: BusEvent<M[K]>) => void | Promise<void>,
    options: SubscribeOptions,
  ): Promise<EventSubscription> {
    checkTopic(this.stream, topic);
    const replay = options.replay;
    // "new" is pinned to the stream's last seq now: the ordered consumer is created lazily by its first pull,
    // and DeliverPolicy.New would then miss what is published in between.
    const after = replay === "all" ? 0 : replay === "new" ? (await this.jsm.streams.info(this.stream)).state.last_seq : replay.afterSeq;
    const consumer = await this.js.consumers.get(this.stream, {
      // One subject as a string: nats.js sends it as filter_subject, which servers before 2.10 accept.
      filter_subjects: `${this.prefix}.${topic}`,
      ...(after === 0 ? { deliver_policy: DeliverPolicy.All } : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: after + 1 }),
    });
    // Bounded: the client holds at most this many events ahead of the handler.
    const messages: ConsumerMessages = await consumer.consume({ max_messages: 100 });
    let closed = false;
    const report = (error: unknown) => options.onError?.(error instanceof Error ? error : new Error(String(error)));
    const loop = (async () => {
      for await (const m of messages) {
        if (closed) break;
        let data: M[K];
        try {
          data = m.json<M[K]>();
        } catch (error) {
          report(new ArborError(`event bus ${this.stream}: event ${m.seq} of ${topic} is not JSON: ${describe(error)}`, "bus_bad_event"));
          continue;
        }
        try {
          await handler({ topic, seq: m.seq, id: m.headers?.get(MSG_ID) ?? "", data });
        } catch (error) {
          report(error);
        }
      }
    })().catch(report);
    const subscription: EventSubscription = {
      close: async () => {
        closed = true;
        this.subscriptions.delete(subscription);
        messages.stop();
        await loop;
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    if (this.ownsConnection) await this.nc.close();
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
