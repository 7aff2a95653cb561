// Prometheus metrics of a SandboxPool (prom-client), registered in the registry the caller passes.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export type AcquireOutcome = "hit" | "in_flight" | "warm" | "miss";

/** The pool's metric set. */
export class SandboxPoolMetrics {
  readonly prepareSeconds: Histogram<"mode">;
  readonly warm: Gauge;
  readonly idle: Gauge;
  readonly queued: Gauge;
  readonly live: Gauge;
  readonly created: Counter;
  readonly destroyed: Counter;
  readonly acquired: Counter<"outcome">;
  readonly reclaimed: Counter;
  readonly leaks: Counter;

  constructor(registry: Registry, prefix = "arbor_sandbox_pool") {
    const registers = [registry];
    this.prepareSeconds = new Histogram({
      name: `${prefix}_prepare_seconds`,
      help: "Time to create a sandbox and run its set-up, on the pool's clock (ahead: prepared before it was asked for; on_demand: on the acquire path).",
      labelNames: ["mode"],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.warm = new Gauge({ name: `${prefix}_warm`, help: "Sandboxes prepared or being prepared and not yet acquired.", registers });
    this.idle = new Gauge({ name: `${prefix}_idle`, help: "Warm sandboxes whose preparation has finished, waiting for their program (a subset of warm).", registers });
    this.queued = new Gauge({ name: `${prefix}_queued`, help: "Program ids waiting for a free warm slot.", registers });
    this.live = new Gauge({ name: `${prefix}_live`, help: "Sandboxes acquired by programs and not yet reclaimed (in use).", registers });
    this.created = new Counter({ name: `${prefix}_created_total`, help: "Sandboxes the pool created through its provider (ahead or on demand).", registers });
    this.destroyed = new Counter({
      name: `${prefix}_destroyed_total`,
      help: "Sandboxes the pool destroyed: reclaimed, closed, or torn down after a failed set-up (created minus destroyed is what it holds).",
      registers,
    });
    this.acquired = new Counter({
      name: `${prefix}_acquired_total`,
      help: "Acquires by outcome (hit: prepared for this program and ready; in_flight: its preparation was still running; warm: a generic warm sandbox; miss: created on demand).",
      labelNames: ["outcome"],
      registers,
    });
    this.reclaimed = new Counter({ name: `${prefix}_reclaimed_total`, help: "Sandboxes destroyed by reclaim (program terminated) or close.", registers });
    this.leaks = new Counter({
      name: `${prefix}_leaks_detected_total`,
      help: "Sandboxes found held for a program that is no longer live (its termination hook never reclaimed it); each is then reclaimed.",
      registers,
    });
  }
}
