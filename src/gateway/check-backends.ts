// Start-up check: every backend must answer before the gateway serves, so a wrong port fails at
// once with one line instead of as a 502 on the first agent call.
import type { Backend } from "../backends/backend.js";
import { ArborError } from "../core/errors.js";

/** Probe all backends together; throws the first failure (in backend order) as one-line ArborError. */
export async function checkBackends(backends: readonly Backend[]): Promise<void> {
  const results = await Promise.allSettled(backends.map((b) => b.health()));
  results.forEach((r, i) => {
    if (r.status === "fulfilled") return;
    if (r.reason instanceof ArborError) throw r.reason;
    const b = backends[i] as Backend;
    const why = r.reason instanceof Error ? r.reason.message : String(r.reason);
    throw new ArborError(`backend '${b.name}' at ${b.url} failed its health check: ${why.replace(/\s+/g, " ")}`, "backend_unhealthy");
  });
}
