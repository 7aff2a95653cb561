// Prometheus metrics of a SandboxPool (prom-client), registered in the registry the caller passes.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export type AcquireOutcome = "hit" | "in_flight" | "warm" | "miss";

/** The pool's metric set. */
export class SandboxPoolMetrics {
  readonly prepareSeconds: Histogram<"mode">;
  readonly warm: Gauge;
  readonly live: Gauge;
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
    this.live = new Gauge({ name: `${prefix}_live`, help: "Sandboxes acquired by programs and not yet reclaimed.", registers });
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
