// Prometheus metrics of one gateway (prom-client), in a registry of its own so that several
// gateways in one process (tests, the simulator) never share or clash on counters.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { ProgramTable } from "./program-table.js";

export type ReleaseReason = "released" | "idle";

/** The gateway's metric set; `registry.metrics()` renders the /metrics text. */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<"backend" | "endpoint" | "status">;
  readonly duration: Histogram<"backend" | "endpoint">;
  readonly inflight: Gauge<"backend">;
  readonly promptTokens: Counter;
  readonly outputTokens: Counter;
  readonly released: Counter<"reason">;

  constructor(table: ProgramTable) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: "arbor_gateway_requests_total",
      help: "Inference requests answered, by backend (none when not routed), endpoint and HTTP status.",
      labelNames: ["backend", "endpoint", "status"],
      registers,
    });
    this.duration = new Histogram({
      name: "arbor_gateway_request_duration_seconds",
      help: "Inference request duration on the gateway's clock, seconds.",
      labelNames: ["backend", "endpoint"],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.inflight = new Gauge({
      name: "arbor_gateway_inflight_requests",
      help: "Inference requests currently at a backend.",
      labelNames: ["backend"],
      registers,
    });
    new Gauge({
      name: "arbor_gateway_programs",
      help: "Programs in the program table by state (terminated counts every release since start).",
      labelNames: ["state"],
      registers,
      collect() {
        const c = table.counts();
        this.set({ state: "active" }, c.active);
        this.set({ state: "terminated" }, c.terminated);
      },
    });
    this.promptTokens = new Counter({ name: "arbor_gateway_prompt_tokens_total", help: "Prompt tokens of recorded calls.", registers });
    this.outputTokens = new Counter({ name: "arbor_gateway_output_tokens_total", help: "Output tokens of recorded calls.", registers });
    this.released = new Counter({
      name: "arbor_gateway_programs_released_total",
      help: "Programs released, by reason (released: explicitly; idle: idle timeout).",
      labelNames: ["reason"],
      registers,
    });
  }
}
