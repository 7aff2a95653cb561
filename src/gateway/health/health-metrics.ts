// Prometheus metrics of backend rotation and call retries, registered on the gateway's own registry.
import { Counter, Gauge, type Registry } from "prom-client";

export interface HealthMetrics {
  /** 1 while a backend is in rotation, 0 while out. */
  up: Gauge<"backend">;
  /** Calls retried on another backend, by the backend that failed. */
  retries: Counter<"backend">;
  /** Times a backend was taken out of rotation. */
  downs: Counter<"backend">;
}

/** Create the rotation metrics on `registry`, every backend starting in rotation. */
export function createHealthMetrics(registry: Registry, backends: readonly string[]): HealthMetrics {
  const registers = [registry];
  const up = new Gauge({ name: "arbor_gateway_backend_up", help: "1 while the backend is in rotation, 0 while it is out.", labelNames: ["backend"], registers });
  for (const b of backends) up.set({ backend: b }, 1);
  return {
    up,
    retries: new Counter({
      name: "arbor_gateway_retries_total",
      help: "Calls retried on another backend after a transport failure, by the backend that failed.",
      labelNames: ["backend"],
      registers,
    }),
    downs: new Counter({ name: "arbor_gateway_backend_down_total", help: "Times a backend was taken out of rotation.", labelNames: ["backend"], registers }),
  };
}
