// The dashboard's server-sent events: every client has a bounded queue of events not yet written; when a
// slow client's queue is full the oldest event is dropped and counted (the next event it gets says how
// many it missed, so the UI knows to re-read), and a heartbeat comment keeps idle connections (and proxies)
// open. Writes wait for the socket to drain: a stalled client costs at most its queue.
import type { ServerResponse } from "node:http";
import type { Clock, Timer } from "../../core/clock.js";

export interface SseHubOptions {
  clock: Clock;
  /** Events kept per client while its socket is busy (drop-oldest beyond). */
  queueSize?: number;
  /** Interval of the `: heartbeat` comment. */
  heartbeatMs?: number;
  /** Clients served at once; more are refused. */
  maxClients?: number;
}

interface Client {
  res: ServerResponse;
  queue: string[];
  dropped: number;
  /** `dropped` as last said to the client. */
  reported: number;
  writing: boolean;
}

/** Fan-out of events to SSE clients with bounded queues. */
export class SseHub {
  private readonly clients = new Set<Client>();
  private readonly queueSize: number;
  private readonly heartbeatMs: number;
  readonly maxClients: number;
  private timer: Timer | undefined;
  private closed = false;

  constructor(private readonly o: SseHubOptions) {
    this.queueSize = o.queueSize ?? 64;
    this.heartbeatMs = o.heartbeatMs ?? 15_000;
    this.maxClients = o.maxClients ?? 64;
    if (!(Number.isInteger(this.queueSize) && this.queueSize >= 1)) throw new Error(`sse: queueSize must be an integer >= 1, got ${this.queueSize}`);
    if (!(this.heartbeatMs > 0)) throw new Error(`sse: heartbeatMs must be > 0, got ${this.heartbeatMs}`);
    this.armHeartbeat();
  }

  get size(): number {
    return this.clients.size;
  }

  /** Take over `res` as an event stream; false (nothing written) when maxClients are connected. */
  attach(res: ServerResponse, first?: { event: string; data: unknown }): boolean {
    if (this.closed || this.clients.size >= this.maxClients) return false;
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const c: Client = { res, queue: [], dropped: 0, reported: 0, writing: false };
    this.clients.add(c);
    res.on("close", () => this.clients.delete(c));
    res.write(": connected\n\n");
    if (first) this.enqueue(c, frame(first.event, first.data));
    return true;
  }

  /** Queue `data` as event `event` for every client. */
  publish(event: string, data: unknown): void {
    const f = frame(event, data);
    for (const c of this.clients) this.enqueue(c, f);
  }

  /** Events dropped so far for each client (tests and the /api/health view). */
  droppedCounts(): number[] {
    return [...this.clients].map((c) => c.dropped);
  }

  /** End every stream and stop the heartbeat. */
  close(): void {
    this.closed = true;
    this.timer?.cancel();
    for (const c of this.clients) c.res.end();
    this.clients.clear();
  }

  private enqueue(c: Client, f: string): void {
    c.queue.push(f);
    if (c.queue.length > this.queueSize) {
      c.queue.shift();
      c.dropped++;
    }
    this.flush(c);
  }

  private flush(c: Client): void {
    if (c.writing) return;
    while (c.queue.length > 0) {
      let f = c.queue.shift() as string;
      // Said once per drop run, before the next event: the UI re-reads what it missed.
      if (c.dropped > c.reported) {
        f = frame("dropped", { dropped: c.dropped }) + f;
        c.reported = c.dropped;
      }
      if (!c.res.write(f)) {
        c.writing = true;
        c.res.once("drain", () => {
          c.writing = false;
          this.flush(c);
        });
        return;
      }
    }
  }

  private armHeartbeat(): void {
    this.timer = this.o.clock.setTimer(this.heartbeatMs, () => {
      for (const c of this.clients) if (!c.writing) c.res.write(": heartbeat\n\n");
      if (!this.closed) this.armHeartbeat();
    });
  }
}

function frame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}
