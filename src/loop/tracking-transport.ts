// What the run-tracking sinks (mlflow-sink.ts, wandb-sink.ts) share: the options every sink takes, one JSON
// request retried with backoff on network errors, 5xx and 429 (a 4xx is a refusal that asking again will not
// mend, so it fails at once as a config error), and the bounded background queue that posts a run's metrics
// without ever stopping training — what cannot be posted is counted, what overflows is dropped and counted.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { retrying } from "../core/retry.js";

/** What every tracking sink takes besides its service's own settings. */
export interface TrackingSinkOptions {
  clock: Clock;
  /** Progress and warnings (a failed post). */
  log: (line: string) => void;
  /** Entries waiting to be posted at most: the oldest are dropped beyond it. */
  maxQueued?: number;
  /** Tries per request (default 5). */
  attempts?: number;
  env?: NodeJS.ProcessEnv;
  fetch?: typeof fetch;
}

/** One JSON request of a sink. */
export interface TrackingRequest {
  method: "GET" | "POST";
  url: string;
  headers: Record<string, string>;
  body?: unknown;
  /** Names the request in errors, e.g. "MLflow runs/create". */
  what: string;
  /** An answer that is not OK but expected (MLflow's 404 for a missing experiment): return `{ value }` to accept it. */
  accept?: (status: number, json: Record<string, unknown>) => { value: unknown } | undefined;
  /** The error message's detail from a failed answer (default: its first 200 characters). */
  detail?: (json: Record<string, unknown>, text: string) => string;
}

/**
 * Send one request and answer its JSON body (`{}` for an empty or non-JSON body), retried with backoff through
 * `core/retry.ts` on network errors and 5xx/429 answers; a 4xx is an ArborError "config" at once.
 */
export function trackingRequest(o: TrackingSinkOptions, req: TrackingRequest): Promise<unknown> {
  const f = o.fetch ?? fetch;
  const op = async (): Promise<unknown> => {
    const r = await f(req.url, {
      method: req.method,
      headers: req.headers,
      ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await r.text();
    let json: Record<string, unknown> = {};
    try {
      const parsed: unknown = text ? JSON.parse(text) : {};
      if (parsed !== null && typeof parsed === "object") json = parsed as Record<string, unknown>;
    } catch {
      // A proxy's HTML page: reported by status below.
    }
    if (r.ok) return json;
    const accepted = req.accept?.(r.status, json);
    if (accepted) return accepted.value;
    const detail = req.detail ? req.detail(json, text) : text.slice(0, 200);
    throw new ArborError(`${req.what}: ${r.status} ${detail}`.trim(), r.status >= 500 || r.status === 429 ? "unreachable" : "config");
  };
  return retrying(req.what, op, o.clock, {
    attempts: o.attempts ?? 5,
    // Refusals (bad request, unauthorised) do not get better by asking again.
    retryable: (e) => !(e instanceof ArborError && e.code === "config"),
  });
}

/**
 * A bounded queue posted in the background by `send`, one drain at a time. Past `max` entries the oldest are
 * dropped (and `onDrop` told how many); a batch `send` rejects is counted as failed and logged, never thrown.
 */
export class TrackingQueue<T> {
  private queue: T[] = [];
  private draining: Promise<void> | undefined;
  /** Entries dropped from a full queue, and entries whose post failed. */
  dropped = 0;
  failed = 0;

  constructor(
    private readonly o: {
      max: number;
      /** How many entries one post takes at most. */
      batch: number;
      send: (entries: T[]) => Promise<void>;
      /** A failed batch, for the log: e.g. "3 metric(s) not logged: …". */
      log: (entries: number, error: Error) => void;
      onDrop?: (entries: number) => void;
    },
  ) {}

  /** Queue entries and start a drain if none runs. */
  push(...entries: T[]): void {
    this.queue.push(...entries);
    if (this.queue.length > this.o.max) {
      const n = this.queue.length - this.o.max;
      this.dropped += n;
      this.o.onDrop?.(n);
      this.queue.splice(0, n);
    }
    this.draining ??= this.drain().finally(() => (this.draining = undefined));
  }

  /** Resolve once everything queued so far has been posted or counted as failed. */
  async flush(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.o.batch);
      try {
        await this.o.send(batch);
      } catch (e) {
        this.failed += batch.length;
        this.o.log(batch.length, e as Error);
      }
    }
  }
}
