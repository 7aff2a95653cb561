// The life of one Arbor service process (`arbor serve engine|gateway`): serve until SIGTERM or SIGINT,
// then drain — readiness 503 at once, new work refused, the requests in flight given `drainMs` to
// finish (what is left is cut and said in the log) — close everything and return, so the process
// exits 0. A second signal exits at once with the shell's code for it (130 for SIGINT, 143 for SIGTERM).
import { SIGNAL_EXIT } from "../core/errors.js";
import type { ServiceProbes } from "../core/service-probes.js";

export interface ServiceLifecycleOptions {
  /** How the log names the service, e.g. `engine e0`. */
  name: string;
  probes: ServiceProbes;
  /** Longest wait for in-flight requests once draining, ms. */
  drainMs: number;
  /** Close the servers, the model, the store (after the drain). */
  close(): Promise<void>;
  log(line: string): void;
}

/** Resolve once the service received a signal, drained and closed. */
export function serveUntilSignalled(o: ServiceLifecycleOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let stopping = false;
    const onSignal = (sig: "SIGINT" | "SIGTERM"): void => {
      if (stopping) {
        o.log(`${o.name}: received ${sig} again while draining; exiting now`);
        process.exit(SIGNAL_EXIT[sig]);
      }
      stopping = true;
      void stop(sig).then(resolve, reject);
    };
    const stop = async (sig: string): Promise<void> => {
      o.probes.drain(`received ${sig}`);
      o.log(`${o.name}: received ${sig}: draining (readiness 503, new work refused; ${o.probes.inFlight} request(s) in flight, waiting up to ${o.drainMs} ms)`);
      const left = await o.probes.settled(o.drainMs);
      if (left > 0) o.log(`${o.name}: drain: ${left} request(s) still in flight after ${o.drainMs} ms; aborting them`);
      else o.log(`${o.name}: drained`);
      await o.close();
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      o.log(`${o.name}: stopped`);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}

/**
 * The probes of a service whose work is not its HTTP requests (a worker's programs, the trainer-api's batches):
 * readiness and the drain flag from `http` (its /healthz and /readyz), the work in flight and the wait for it
 * from `work` — `settled(ms)` resolves with what was still in flight after `ms`.
 */
export function workProbes(http: ServiceProbes, work: { inFlight(): number; settled(ms: number): Promise<number> }): ServiceProbes {
  return {
    get draining() {
      return http.draining;
    },
    get inFlight() {
      return work.inFlight();
    },
    drain: (reason) => http.drain(reason),
    settled: (ms) => work.settled(ms),
  };
}
