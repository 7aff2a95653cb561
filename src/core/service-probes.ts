// Health, readiness and drain of one HTTP service (engine, gateway) run alone, e.g. behind a load
// balancer or in Kubernetes: GET /healthz says the process answers, GET /readyz whether it can serve
// now (503 with the reason otherwise, and from the moment it drains), and a drain refuses new work with
// 503 while the requests in flight finish, so that a stopping replica loses no call it accepted.
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Clock, Timer } from "./clock.js";

/** Routes that are never counted as work in flight (probes and scrapes). */
const PROBE_ROUTES = new Set(["/healthz", "/readyz", "/health", "/metrics"]);

export interface ServiceProbeOptions {
  clock: Clock;
  /** Why the service cannot serve now, or undefined when it can (checked on every GET /readyz). */
  notReady(): Promise<string | undefined> | string | undefined;
  /**
   * While draining: why this request is new work to refuse with 503, or undefined to let it finish
   * (e.g. the gateway still serves calls of programs it holds). Runs after auth and body parsing.
   */
  refuseWhileDraining(req: FastifyRequest): string | undefined;
}

/** The drain state of a service; see {@link registerServiceProbes}. */
export interface ServiceProbes {
  readonly draining: boolean;
  /** Requests in flight (probes and metrics not counted). */
  readonly inFlight: number;
  /** Start draining: readiness 503 and new work refused from now on (idempotent). */
  drain(reason: string): void;
  /** Resolves with 0 once nothing is in flight, or with the number still in flight after `timeoutMs`. */
  settled(timeoutMs: number): Promise<number>;
}

/**
 * Add GET /healthz, GET /readyz, the in-flight count and the draining refusal to `app` (before it
 * listens). Refusals and not-ready answers are OpenAI-style error bodies with code `draining` or
 * `not_ready`, so clients of both surfaces read them.
 */
export function registerServiceProbes(app: FastifyInstance, opts: ServiceProbeOptions): ServiceProbes {
  let drainReason: string | undefined;
  let inFlight = 0;
  const waiters = new Set<() => void>();
  const done = (): void => {
    inFlight--;
    if (inFlight === 0) for (const w of [...waiters]) w();
  };
  app.addHook("onRequest", async (req, reply) => {
    if (PROBE_ROUTES.has(req.routeOptions.url ?? "")) return;
    inFlight++;
    // 'close' fires once the response is sent or the connection is gone, for streamed (hijacked) replies too.
    reply.raw.once("close", done);
  });
  app.addHook("preHandler", async (req, reply) => {
    if (drainReason === undefined || PROBE_ROUTES.has(req.routeOptions.url ?? "")) return;
    const why = opts.refuseWhileDraining(req);
    if (why === undefined) return;
    return reply
      .code(503)
      .header("retry-after", "1")
      .send({ error: { message: `${why}: ${drainReason}`, type: "server_error", param: null, code: "draining" } });
  });
  app.get("/healthz", async () => ({ status: "alive" }));
  app.get("/readyz", async (_req, reply) => {
    if (drainReason !== undefined) return reply.code(503).send({ status: "draining", reason: drainReason });
    let why: string | undefined;
    try {
      why = await opts.notReady();
    } catch (e) {
      why = e instanceof Error ? e.message : String(e);
    }
    if (why !== undefined) return reply.code(503).send({ status: "not_ready", reason: why });
    return { status: "ready" };
  });
  return {
    get draining() {
      return drainReason !== undefined;
    },
    get inFlight() {
      return inFlight;
    },
    drain(reason) {
      drainReason ??= reason;
    },
    settled(timeoutMs) {
      if (inFlight === 0) return Promise.resolve(0);
      return new Promise<number>((resolve) => {
        const idle = (): void => {
          waiters.delete(idle);
          timer.cancel();
          resolve(0);
        };
        waiters.add(idle);
        const timer: Timer = opts.clock.setTimer(timeoutMs, () => {
          waiters.delete(idle);
          resolve(inFlight);
        });
      });
    },
  };
}
