// Prometheus gauges of external engines' weights, on the gateway's /metrics: the policy version each engine
// serves and whether it left the rotation after a failed load (the same numbers as the run summary).
import { Gauge, type Registry } from "prom-client";
import type { SyncedBackend } from "./synced-backend.js";

/** Register `arbor_backend_policy_version` and `arbor_backend_weights_retired` for `backends` on `registry`. */
export function registerWeightMetrics(registry: Registry, backends: readonly SyncedBackend[]): void {
  new Gauge({
    name: "arbor_backend_policy_version",
    help: "Policy version an external engine serves (confirmed after each weight switch).",
    labelNames: ["backend"],
    registers: [registry],
    collect() {
      for (const b of backends) this.set({ backend: b.name }, b.version);
    },
  });
  new Gauge({
    name: "arbor_backend_weights_retired",
    help: "1 when an external engine left the rotation because it failed to load a policy version.",
    labelNames: ["backend"],
    registers: [registry],
    collect() {
      for (const b of backends) this.set({ backend: b.name }, b.retired === undefined ? 0 : 1);
    },
  });
}
