// The WorkQueue in process, on an injected Clock: the embedded mode (one machine, no broker) and the simulator
// run the same worker code as a JetStream deployment. Semantics follow JetStream's work-queue stream with a
// durable pull consumer: ack wait, bounded deliveries, de-duplication window, dead letters.
import type { Clock, Timer } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import { runDelivery } from "./run-delivery.js";
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

interface Entry<T> {
  id: string;
  payload: T;
  seq: number;
  deliveries: number;
  /** Bumped on each delivery so a settle from an earlier (expired) delivery does nothing. */
  token: number;
  timer?: Timer;
  owner?: ConsumerState<T>;
}

interface ConsumerState<T> {
  client: MemoryWorkQueue<T>;
  handler: WorkHandler<T>;
  options: ConsumeOptions;
  running: Set<Promise<void>>;
  closing: boolean;
  abandoned: boolean;
}

/** The queue's state, shared by its clients. */
class Shared<T> {
  nextSeq = 1;
  readonly entries = new Map<string, Entry<T>>();
  readonly ready: Entry<T>[] = [];
  readonly published = new Map<string, number>();
  readonly consumers: ConsumerState<T>[] = [];
  readonly dead: DeadLetter<T>[] = [];
  readonly clients: MemoryWorkQueue<T>[] = [];
  nextConsumer = 0;

  constructor(
    readonly name: string,
    readonly options: WorkQueueOptions<T>,
    readonly clock: Clock,
  ) {}
}

/** In-process {@link WorkQueue}; `connect()` opens another client of the same queue, as a second worker would. */
export class MemoryWorkQueue<T> implements WorkQueue<T> {
  private closed = false;

  private constructor(
    private readonly s: Shared<T>,
    private readonly onDeadLetter: ((dl: DeadLetter<T>) => void) | undefined,
  ) {
    s.clients.push(this);
  }

  /** Creates a queue named `name` and returns its first client (with `options.onDeadLetter`). */
  static create<T>(name: string, options: WorkQueueOptions<T>, clock: Clock): MemoryWorkQueue<T> {
    checkWorkQueueOptions(name, options);
    return new MemoryWorkQueue(new Shared(name, options, clock), options.onDeadLetter);
  }

  /** Another client of this queue, reporting its dead letters to `onDeadLetter`. */
  connect(onDeadLetter?: (dl: DeadLetter<T>) => void): MemoryWorkQueue<T> {
    return new MemoryWorkQueue(this.s, onDeadLetter);
  }

  get name(): string {
    return this.s.name;
  }

  async publish(id: string, payload: T): Promise<PublishResult> {
    this.checkOpen();
    const s = this.s;
    const now = s.clock.now();
    for (const [known, at] of s.published) {
      // Map order is publish order, so the first one inside the window ends the pruning.
      if (now - at < s.options.duplicateWindowMs) break;
      s.published.delete(known);
    }
    if (s.published.has(id)) return { duplicate: true };
    const max = s.options.maxMessages ?? DEFAULT_MAX_MESSAGES;
    if (s.entries.size >= max) throw new CapacityError(`work queue ${s.name}`, max);
    s.published.set(id, now);
    const entry: Entry<T> = { id, payload, seq: s.nextSeq++, deliveries: 0, token: 0 };
    s.entries.set(id, entry);
    this.enqueue(entry);
    this.dispatch();
    return { duplicate: false };
  }

  consume(handler: WorkHandler<T>, options: ConsumeOptions): WorkConsumer {
    this.checkOpen();
    checkConsumeOptions(this.s.name, options);
    const c: ConsumerState<T> = { client: this, handler, options, running: new Set(), closing: false, abandoned: false };
    this.s.consumers.push(c);
    queueMicrotask(() => this.dispatch());
    return {
      get inFlight() {
        return c.running.size;
      },
      close: () => this.closeConsumer(c),
      abandon: async () => {
        c.abandoned = true;
        this.detach(c);
      },
    };
  }

  async deadLetters(): Promise<DeadLetter<T>[]> {
    return this.s.dead.map((dl) => ({ ...dl }));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    const mine = this.s.consumers.filter((c) => c.client === this);
    await Promise.all(mine.map((c) => this.closeConsumer(c)));
    this.closed = true;
    this.s.clients.splice(this.s.clients.indexOf(this), 1);
  }

  private checkOpen(): void {
    if (this.closed) throw new ArborError(`work queue ${this.s.name}: this client is closed`, "broker_closed");
  }

  private async closeConsumer(c: ConsumerState<T>): Promise<void> {
    c.closing = true;
    const drained = Promise.all([...c.running]).then(() => undefined);
    const limit = c.options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    let timer: Timer | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = this.s.clock.setTimer(limit, () => {
        // What is still running is left as a dead worker would leave it: redelivered after the ack wait.
        c.abandoned = true;
        this.detach(c);
        reject(
          new ArborError(
            `work queue ${this.s.name}: ${c.running.size} handler(s) still running after the ${limit} ms drain timeout`,
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
    this.detach(c);
  }

  private detach(c: ConsumerState<T>): void {
    const i = this.s.consumers.indexOf(c);
    if (i >= 0) this.s.consumers.splice(i, 1);
  }

  /** Puts `entry` back in publish order. */
  private enqueue(entry: Entry<T>): void {
    const ready = this.s.ready;
    let i = ready.length;
    while (i > 0 && ready[i - 1]!.seq > entry.seq) i--;
    ready.splice(i, 0, entry);
  }

  /** Hands ready messages to consumers with free slots, round robin. */
  private dispatch(): void {
    const s = this.s;
    while (s.ready.length > 0) {
      const c = this.nextConsumer();
      if (!c) return;
      this.deliver(s.ready.shift()!, c);
    }
  }

  private nextConsumer(): ConsumerState<T> | undefined {
    const cs = this.s.consumers;
    for (let k = 0; k < cs.length; k++) {
      const c = cs[(this.s.nextConsumer + k) % cs.length]!;
      if (c.closing || c.abandoned || c.running.size >= c.options.maxInFlight) continue;
      this.s.nextConsumer = (this.s.nextConsumer + k + 1) % cs.length;
      return c;
    }
    return undefined;
  }

  private deliver(entry: Entry<T>, c: ConsumerState<T>): void {
    const s = this.s;
    entry.deliveries++;
    const token = ++entry.token;
    entry.owner = c;
    const current = () => s.entries.get(entry.id) === entry && entry.token === token;
    const armAckWait = () => {
      entry.timer?.cancel();
      entry.timer = s.clock.setTimer(s.options.ackWaitMs, () => this.expire(entry, token));
    };
    armAckWait();
    const finish = (then: () => void) => async () => {
      if (!current()) return;
      entry.timer?.cancel();
      entry.owner = undefined;
      then();
      this.dispatch();
    };
    const run = runDelivery(
      s.name,
      {
        id: entry.id,
        payload: entry.payload,
        delivery: entry.deliveries,
        maxDeliver: s.options.maxDeliver,
        ack: finish(() => s.entries.delete(entry.id)),
        term: (_reason) => finish(() => s.entries.delete(entry.id))(),
        nak: (delayMs) =>
          finish(() => {
            if (delayMs <= 0) this.enqueue(entry);
            else entry.timer = s.clock.setTimer(delayMs, () => this.requeue(entry, token));
          })(),
        working: async () => {
          if (current()) armAckWait();
        },
        deadLetter: (reason) => finish(() => this.deadLetter(entry, reason, c.client))(),
      },
      c.handler,
      () => c.abandoned,
    );
    const tracked: Promise<void> = run
      .catch((error: unknown) => c.options.onError?.(error instanceof Error ? error : new Error(String(error))))
      .finally(() => {
        c.running.delete(tracked);
        this.dispatch();
      });
    c.running.add(tracked);
  }

  private requeue(entry: Entry<T>, token: number): void {
    if (this.s.entries.get(entry.id) !== entry || entry.token !== token) return;
    entry.timer = undefined;
    this.enqueue(entry);
    this.dispatch();
  }

  /** The ack wait ran out: redeliver, or dead-letter when that was the last delivery. */
  private expire(entry: Entry<T>, token: number): void {
    const s = this.s;
    if (s.entries.get(entry.id) !== entry || entry.token !== token) return;
    const owner = entry.owner?.client;
    entry.owner = undefined;
    entry.timer = undefined;
    if (entry.deliveries >= s.options.maxDeliver) {
      this.deadLetter(
        entry,
        `not acknowledged within the ${s.options.ackWaitMs} ms ack wait on the last delivery (${entry.deliveries} of ${s.options.maxDeliver})`,
        owner,
      );
    } else {
      this.enqueue(entry);
    }
    this.dispatch();
  }

  /** Publishes the dead letter and reports it to one open client: the last owner's if it is still open. */
  private deadLetter(entry: Entry<T>, reason: string, owner: MemoryWorkQueue<T> | undefined): void {
    const s = this.s;
    s.entries.delete(entry.id);
    const dl: DeadLetter<T> = { id: entry.id, payload: entry.payload, deliveries: entry.deliveries, reason };
    s.dead.push(dl);
    const reporter = owner && !owner.closed ? owner : s.clients.find((client) => !client.closed);
    reporter?.onDeadLetter?.({ ...dl });
  }
}
