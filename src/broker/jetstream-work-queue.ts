// The WorkQueue on NATS JetStream (issue 16): a work-queue-retention stream, one durable pull consumer with
// explicit acks, `ack_wait` and `max_deliver`, de-duplication by the `Nats-Msg-Id` header within the stream's
// `duplicate_window`. Dead letters: a handler's last failure is published here directly; a message whose
// deliveries ran out on ack waits is announced by the server's
// `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>` advisory (it stays in the stream), which one
// client (a queue group) turns into the dead letter and then deletes. Dead letters go to a subject captured by
// the `<stream>_DEAD` stream, de-duplicated by stream sequence, so the two paths report a message once. A
// delivery's number is the server's unless this client saw the message more often (`delivery-counts.ts`).
import {
  AckPolicy,
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import { connect, nanos, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import type { Clock } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { retrying } from "../core/retry.js";
import { DeliveryCounts } from "./delivery-counts.js";
import { runDelivery, type Delivery } from "./run-delivery.js";
import {
  checkConsumeOptions,
  checkWorkQueueOptions,
  DEFAULT_DRAIN_TIMEOUT_MS,
  DEFAULT_MAX_MESSAGES,
  type ConsumeOptions,
  type DeadLetter,
  type PublishResult,
  type WorkConsumer,
  type WorkHandler,
  type WorkQueue,
  type WorkQueueOptions,
} from "./work-queue.js";

export interface JetStreamWorkQueueOptions<T> extends WorkQueueOptions<T> {
  /** The stream's name, also the queue's name (JetStream stream-name rules: no spaces, dots, `*`, `>`). */
  stream: string;
  /** Subject the work is published on; defaults to `arbor.work.<stream>`. */
  subject?: string;
  /** The durable consumer all workers share; defaults to `workers`. */
  consumer?: string;
  /** Subject dead letters are published on (captured by stream `<stream>_DEAD`); defaults to `arbor.dead.<stream>`. */
  deadLetterSubject?: string;
  /** How long one pull waits for messages (ms, >= 1000, default 1000): `close()` waits at most this for the pull. */
  pullExpiresMs?: number;
  /** Failures outside any consumer (turning a max-deliveries advisory into a dead letter). */
  onError?: (error: Error) => void;
  /** Consecutive failed pulls after which a consumer stops with an error (default 10). */
  maxPullFailures?: number;
  clock?: Clock;
}

/** The advisory the server publishes when a message's deliveries ran out (nats-server `JSConsumerDeliveryExceededAdvisory`). */
interface MaxDeliveriesAdvisory {
  stream_seq: number;
  deliveries: number;
}

const MSG_ID = "Nats-Msg-Id";

/** {@link WorkQueue} on NATS JetStream. Open one per worker with {@link JetStreamWorkQueue.connect} or `open`. */
export class JetStreamWorkQueue<T> implements WorkQueue<T> {
  private readonly consumers = new Set<JetStreamConsumer<T>>();
  private readonly advisoryWork = new Set<Promise<void>>();
  private advisories?: Subscription;
  private closed = false;
  /** (For this module's consumers.) Deliveries this client saw, bounded by the stream's own bound on messages. */
  readonly deliveryCounts: DeliveryCounts;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly o: Required<Omit<JetStreamWorkQueueOptions<T>, "onDeadLetter" | "onError">> &
      Pick<JetStreamWorkQueueOptions<T>, "onDeadLetter" | "onError">,
  ) {
    this.deliveryCounts = new DeliveryCounts(o.maxMessages, o.maxDeliver);
  }

  /** Connects to `servers` (this queue closes the connection on `close()`) and opens the queue. */
  static async connect<T>(servers: string | string[], options: JetStreamWorkQueueOptions<T>): Promise<JetStreamWorkQueue<T>> {
    let nc: NatsConnection;
    try {
      nc = await connect({ servers, timeout: 5000, maxReconnectAttempts: 10 });
    } catch (error) {
      throw new ArborError(`work queue ${options.stream}: cannot reach NATS at ${String(servers)}: ${describe(error)}`, "broker_unreachable");
    }
    try {
      return await JetStreamWorkQueue.open<T>(nc, options, true);
    } catch (error) {
      await nc.close();
      throw error;
    }
  }

  /**
   * Opens the queue on an existing connection: creates the work stream, the dead-letter stream and the durable
   * consumer where missing (an existing one with other settings is an error), and joins the dead-letter watchers.
   */
  static async open<T>(nc: NatsConnection, options: JetStreamWorkQueueOptions<T>, ownsConnection = false): Promise<JetStreamWorkQueue<T>> {
    checkWorkQueueOptions(options.stream, options);
    const pullExpiresMs = options.pullExpiresMs ?? 1000;
    if (!(pullExpiresMs >= 1000)) {
      throw new ArborError(`work queue ${options.stream}: pullExpiresMs must be >= 1000 (JetStream's minimum), got ${pullExpiresMs}`, "config");
    }
    const o = {
      ...options,
      subject: options.subject ?? `arbor.work.${options.stream}`,
      consumer: options.consumer ?? "workers",
      deadLetterSubject: options.deadLetterSubject ?? `arbor.dead.${options.stream}`,
      pullExpiresMs,
      maxPullFailures: options.maxPullFailures ?? 10,
      maxMessages: options.maxMessages ?? DEFAULT_MAX_MESSAGES,
      clock: options.clock ?? realClock,
    };
    const jsm = await jetstreamManager(nc);
    const q = new JetStreamWorkQueue<T>(nc, ownsConnection, jetstream(nc), jsm, o);
    await q.setUp();
    return q;
  }

  get name(): string {
    return this.o.stream;
  }

  private get deadStream(): string {
    return `${this.o.stream}_DEAD`;
  }

  private async setUp(): Promise<void> {
    const o = this.o;
    const common = { storage: StorageType.File, duplicate_window: nanos(o.duplicateWindowMs), max_msgs: o.maxMessages, discard: DiscardPolicy.New };
    const work = { name: o.stream, subjects: [o.subject], retention: RetentionPolicy.Workqueue, ...common };
    const dead = { name: this.deadStream, subjects: [o.deadLetterSubject], retention: RetentionPolicy.Limits, ...common };
    for (const config of [work, dead]) {
      await this.ensure(
        `stream ${config.name}`,
        config,
        () => this.jsm.streams.info(config.name).then((i) => i.config as unknown as Record<string, unknown>),
        () => this.jsm.streams.add(config),
      );
    }
    const consumer = {
      durable_name: o.consumer,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(o.ackWaitMs),
      max_deliver: o.maxDeliver,
      filter_subject: o.subject,
    };
    await this.ensure(
      `consumer ${o.consumer} of stream ${o.stream}`,
      consumer,
      () => this.jsm.consumers.info(o.stream, o.consumer).then((i) => i.config as unknown as Record<string, unknown>),
      () => this.jsm.consumers.add(o.stream, consumer),
    );
    // A queue group: each advisory reaches one client of this queue, which dead-letters the message.
    this.advisories = this.nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${o.stream}.${o.consumer}`, {
      queue: `arbor-dead-letters.${o.stream}`,
      callback: (error, msg) => {
        if (error) return;
        const work = this.onMaxDeliveries(msg).catch((e: unknown) => this.report(e));
        this.advisoryWork.add(work);
        void work.finally(() => this.advisoryWork.delete(work));
      },
    });
    await this.nc.flush();
  }

  /**
   * Creates `what` with `wanted` unless it exists; an existing one must have the same settings, because adding
   * over it would silently change the ack wait or bounds every other worker relies on.
   */
  private async ensure(
    what: string,
    wanted: Record<string, unknown>,
    info: () => Promise<Record<string, unknown>>,
    add: () => Promise<unknown>,
  ): Promise<void> {
    let existing: Record<string, unknown> | undefined;
    try {
      existing = await info();
    } catch (error) {
      if (!/not found/i.test(describe(error))) {
        throw new ArborError(`work queue ${this.o.stream}: cannot read ${what}: ${describe(error)}`, "broker_setup");
      }
    }
    if (existing) {
      const differ = Object.keys(wanted).filter((k) => JSON.stringify(existing[k]) !== JSON.stringify(wanted[k]));
      if (differ.length > 0) {
        const detail = differ.map((k) => `${k} is ${JSON.stringify(existing[k])}, wanted ${JSON.stringify(wanted[k])}`).join("; ");
        throw new ArborError(`work queue ${this.o.stream}: ${what} exists with other settings: ${detail}`, "broker_setup");
      }
      return;
    }
    try {
      await add();
    } catch (error) {
      throw new ArborError(`work queue ${this.o.stream}: cannot create ${what}: ${describe(error)}`, "broker_setup");
    }
  }

  async publish(id: string, payload: T): Promise<PublishResult> {
    this.checkOpen();
    if (id.length === 0) throw new ArborError(`work queue ${this.o.stream}: a message id must not be empty`, "config");
    try {
      const ack = await this.js.publish(this.o.subject, JSON.stringify(payload), { msgID: id });
      return { duplicate: ack.duplicate };
    } catch (error) {
      if (/maximum messages/i.test(describe(error))) throw new CapacityError(`work queue ${this.o.stream}`, this.o.maxMessages);
      throw new ArborError(`work queue ${this.o.stream}: publish of ${id} failed: ${describe(error)}`, "broker_publish");
    }
  }

  consume(handler: WorkHandler<T>, options: ConsumeOptions): WorkConsumer {
    this.checkOpen();
    checkConsumeOptions(this.o.stream, options);
    const c = new JetStreamConsumer<T>(this, handler, options);
    this.consumers.add(c);
    c.start(() => this.consumers.delete(c));
    return c;
  }

  async deadLetters(): Promise<DeadLetter<T>[]> {
    const info = await this.jsm.streams.info(this.deadStream);
    const out: DeadLetter<T>[] = [];
    if (info.state.messages === 0) return out;
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const stored = await this.jsm.streams.getMessage(this.deadStream, { seq });
      if (stored) out.push(stored.json<DeadLetter<T>>());
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await Promise.all([...this.consumers].map((c) => c.close()));
    } finally {
      this.closed = true;
      await this.advisories?.drain().catch(() => undefined);
      await Promise.all([...this.advisoryWork]);
      if (this.ownsConnection) await this.nc.close();
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new ArborError(`work queue ${this.o.stream}: this client is closed`, "broker_closed");
  }

  /**
   * The server gave up on a message (ack waits ran out): publish its dead letter, then delete it. The advisory comes
   * once, so a failure here (the broker busy, a reconnect) is retried: given up, the message would stay in the work
   * stream with nobody told.
   */
  private async onMaxDeliveries(msg: Msg): Promise<void> {
    const advisory = msg.json<MaxDeliveriesAdvisory>();
    await retrying(`work queue ${this.o.stream}: dead-lettering message ${advisory.stream_seq}`, () => this.deadLetterGivenUp(advisory), this.o.clock, {
      onRetry: (e) => this.report(e),
    });
  }

  private async deadLetterGivenUp(advisory: MaxDeliveriesAdvisory): Promise<void> {
    const seq = advisory.stream_seq;
    let stored: Awaited<ReturnType<JetStreamManager["streams"]["getMessage"]>>;
    try {
      stored = await this.jsm.streams.getMessage(this.o.stream, { seq });
    } catch (e) {
      if (/no message found|not found/i.test(describe(e))) return;
      throw e;
    }
    if (!stored) return; // Already dead-lettered by a handler (termed) or by another client.
    const id = stored.header?.get(MSG_ID) || `seq-${seq}`;
    const payload = decode<T>(stored.data);
    await this.publishDeadLetter(seq, {
      id,
      payload: payload.ok ? payload.value : undefined,
      deliveries: advisory.deliveries,
      reason: `not acknowledged within the ${this.o.ackWaitMs} ms ack wait on the last delivery (${advisory.deliveries} of ${this.o.maxDeliver})`,
    });
    await this.jsm.streams.deleteMessage(this.o.stream, seq, false).catch(() => false);
    this.deliveryCounts.settled(seq);
  }

  /** (For this module's consumers.) Publishes `dl` once per stream sequence and reports it when this call was the one that published it. */
  async publishDeadLetter(seq: number, dl: DeadLetter<T>): Promise<void> {
    let duplicate: boolean;
    try {
      const ack = await this.js.publish(this.o.deadLetterSubject, JSON.stringify(dl), { msgID: `${this.o.stream}:${seq}` });
      duplicate = ack.duplicate;
    } catch (error) {
      throw new ArborError(`work queue ${this.o.stream}: dead letter of ${dl.id} not published: ${describe(error)}`, "broker_dead_letter");
    }
    if (!duplicate) this.o.onDeadLetter?.(dl);
  }

  /** (For this module's consumers.) The resolved options. */
  get settings() {
    return this.o;
  }

  get connection(): NatsConnection {
    return this.nc;
  }

  get client(): JetStreamClient {
    return this.js;
  }

  private report(error: unknown): void {
    // An advisory failure has no handler to go to: the queue's onError hears it, else the first consumer's.
    const e = error instanceof Error ? error : new Error(String(error));
    if (this.o.onError) this.o.onError(e);
    else [...this.consumers][0]?.reportError(e);
  }
}

/** One pull loop: at most `maxInFlight` deliveries at once, each run through {@link runDelivery}. */
class JetStreamConsumer<T> implements WorkConsumer {
  private readonly running = new Set<Promise<void>>();
  private closing = false;
  private abandoned = false;
  private batch?: ConsumerMessages;
  private loop: Promise<void> = Promise.resolve();
  private slotFreed?: () => void;

  constructor(
    private readonly q: JetStreamWorkQueue<T>,
    private readonly handler: WorkHandler<T>,
    private readonly options: ConsumeOptions,
  ) {}

  get inFlight(): number {
    return this.running.size;
  }

  start(onEnd: () => void): void {
    this.loop = this.pull()
      .catch((error: unknown) => this.reportError(error))
      .finally(onEnd);
  }

  reportError(error: unknown): void {
    this.options.onError?.(error instanceof Error ? error : new Error(String(error)));
  }

  private async pull(): Promise<void> {
    const o = this.q.settings;
    const consumer = await this.q.client.consumers.get(o.stream, o.consumer);
    let failures = 0;
    while (!this.closing && !this.abandoned) {
      const free = this.options.maxInFlight - this.running.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        continue;
      }
      try {
        this.batch = await consumer.fetch({ max_messages: free, expires: o.pullExpiresMs });
        for await (const m of this.batch) {
          // A dead worker handles nothing more: what it was sent waits out the ack wait and is redelivered.
          if (this.abandoned) break;
          this.handle(m);
        }
        failures = 0;
      } catch (error) {
        if (this.abandoned) return;
        failures++;
        if (failures >= o.maxPullFailures) {
          throw new ArborError(`work queue ${o.stream}: consumer stopped after ${failures} failed pulls: ${describe(error)}`, "broker_pull");
        }
        this.reportError(error);
        await o.clock.sleep(Math.min(100 * 2 ** failures, 5000));
      } finally {
        this.batch = undefined;
      }
    }
  }

  private handle(m: JsMsg): void {
    const q = this.q;
    const o = q.settings;
    const id = m.headers?.get(MSG_ID) || `seq-${m.seq}`;
    const flush = () => q.connection.flush();
    const payload = decode<T>(m.data);
    const counts = q.deliveryCounts;
    const deliveries = counts.delivered(m.seq, m.info.deliveryCount);
    let run: Promise<void>;
    if (payload.ok) {
      const delivery: Delivery<T> = {
        id,
        payload: payload.value,
        delivery: deliveries,
        maxDeliver: o.maxDeliver,
        ack: async () => {
          if (!(await m.ackAck())) {
            throw new ArborError(`work queue ${o.stream}: the server did not confirm the ack of ${id}`, "broker_ack");
          }
          counts.settled(m.seq);
        },
        nak: async (delayMs) => {
          m.nak(delayMs > 0 ? delayMs : undefined);
          await flush();
        },
        working: async () => {
          m.working();
          await flush();
        },
        term: async () => {
          // A plain +TERM: servers before 2.10 ignore "+TERM <reason>" and would redeliver the message. The
          // reason is the worker's to record (the program's termination), not the broker's.
          m.term();
          counts.settled(m.seq);
          await flush();
        },
        deadLetter: async (reason) => {
          await q.publishDeadLetter(m.seq, { id, payload: payload.value, deliveries, reason });
          m.term();
          counts.settled(m.seq);
          await flush();
        },
      };
      run = runDelivery(o.stream, delivery, this.handler, () => this.abandoned);
    } else {
      // A payload no worker can read is given up at once rather than retried maxDeliver times.
      const reason = `payload is not JSON: ${payload.error}`;
      run = q
        .publishDeadLetter(m.seq, { id, payload: undefined, deliveries, reason })
        .then(() => {
          m.term();
          counts.settled(m.seq);
          return flush();
        });
    }
    const tracked: Promise<void> = run
      .catch((error: unknown) => this.reportError(error))
      .finally(() => {
        this.running.delete(tracked);
        this.slotFreed?.();
        this.slotFreed = undefined;
      });
    this.running.add(tracked);
  }

  async close(): Promise<void> {
    this.closing = true;
    this.slotFreed?.();
    const o = this.q.settings;
    const limit = this.options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    // The open pull ends within pullExpiresMs; what it still yields is handled and drained like the rest.
    const drained = this.loop.then(() => Promise.all([...this.running])).then(() => undefined);
    let timer: { cancel(): void } | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = o.clock.setTimer(limit, () => {
        this.abandoned = true;
        this.batch?.stop();
        reject(
          new ArborError(
            `work queue ${o.stream}: ${this.running.size} handler(s) still running after the ${limit} ms drain timeout`,
            "broker_drain_timeout",
          ),
        );
      });
    });
    try {
      await Promise.race([drained, timedOut]);
    } finally {
      timer?.cancel();
    }
  }

  async abandon(): Promise<void> {
    this.abandoned = true;
    this.batch?.stop();
    this.slotFreed?.();
    await this.loop;
  }
}

function decode<T>(data: Uint8Array): { ok: true; value: T } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(new TextDecoder().decode(data)) as T };
  } catch (error) {
    return { ok: false, error: describe(error) };
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
