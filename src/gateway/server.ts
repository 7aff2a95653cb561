// The gateway's HTTP shell (fastify): OpenAI-compatible routes addressed per program, routing to
// backends, and a token trace of every successful call. Decisions live in the I/O-free ProgramTable
// and Router; this file only wires requests to them (the call paths live beside it: serve-call.ts
// and what it calls, surface-routes.ts, program-routes.ts). Open by default — listen on 127.0.0.1
// only (the CLI's default) unless `auth` is configured: then program keys and an admin token guard it.
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { BackendUnreachableError, isTokenBackend, type Backend } from "../backends/backend.js";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { fastifyHttpLimitOptions, limitConnections, resolveHttpLimits, type HttpLimits } from "../core/http-limits.js";
import { jsonShapeViolation } from "../core/json-limits.js";
import { realClock } from "../core/real-clock.js";
import { timeOrderedId } from "../core/time-ordered-id.js";
import { registerServiceProbes, type ServiceProbes } from "../core/service-probes.js";
import type { Call, TraceSink } from "../core/types.js";
import { admitted, PROGRAM_HEADER, programHeader, type ProgramRequest } from "./admit-call.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import { GatewayAuth, type AuthConfig, type CredentialHeaders } from "./auth/gateway-auth.js";
import { ProgramKeyTable } from "./auth/key-table.js";
import { ProgramLimiter, type ProgramLimits } from "./auth/program-limiter.js";
import { checkBackends } from "./check-backends.js";
import { dividedRolloutFromConfig } from "./divided/divided-rollout.js";
import type { GatewayContext } from "./gateway-context.js";
import { GatewayMetrics, type ReleaseReason } from "./gateway-metrics.js";
import { gatewayNotReady } from "./gateway-readiness.js";
import { HealthLoop } from "./health/health-loop.js";
import { createHealthMetrics } from "./health/health-metrics.js";
import { CAPACITY_RETRY_AFTER_S, InvalidRequestError, openAiError, openAiErrorType, toOpenAiError } from "./http-errors.js";
import { prepareRequest, type Endpoint } from "./openai-request.js";
import type { CallGate } from "./pausing/call-gate.js";
import { PauseGate, type PauseGateConfig } from "./pausing/pause-gate.js";
import { programRelease } from "./program-release.js";
import { registerProgramRoutes } from "./program-routes.js";
import { registerRunRoutes, type RunStore } from "./run-routes.js";
import { ProgramTable, type ProgramStore } from "./program-table.js";
import type { PluginRouter } from "./routing/plugin-router.js";
import { createPluginRouter, resolveRoutingConfig, type RoutingConfig } from "./routing/registry.js";
import { serveCall } from "./serve-call.js";
import { surfaceRoutes } from "./surface-routes.js";
import { asAnthropicErrorBody } from "./surfaces/anthropic-error.js";
import { countTokens } from "./surfaces/anthropic-count-tokens.js";
import { fastifyLogger } from "../core/logger.js";
import type { Logger } from "pino";
import { MAX_TOKENS_POLICIES, type MaxTokensPolicy } from "./token-path/max-tokens.js";

export { PROGRAM_HEADER };

/** Idle release default, ms (GatewayOptions.idleReleaseMs). */
export const DEFAULT_IDLE_RELEASE_MS = 600_000;
/** Longest program id (the program table's limit). */
const MAX_PROGRAM_ID_CHARS = 256;
/** Most tools one request may declare (OpenAI's own limit). */
export const MAX_TOOLS = 128;

export interface GatewayOptions {
  backends: Backend[];
  /** Structured logs (pino, core/logger.ts): Fastify's, requests at debug; none when absent. */
  logger?: Logger;
  /** Where calls are recorded when the gateway has no store (a trace-only gateway: programs open on their first call). */
  sink?: TraceSink;
  /**
   * The trajectory store: the gateway's program table then owns the programs' rows — POST /programs
   * creates them, release ends them — and records calls into it; calls for unknown programs get 404.
   */
  store?: ProgramStore & TraceSink & RunStore;
  /** Run of programs created (store-backed) without a run_id. */
  runId?: string;
  clock?: Clock;
  /** Active programs at most (default 1024). */
  maxPrograms?: number;
  /** Limit for one upstream call, ms (default 120000); past it the client gets 504. */
  callTimeoutMs?: number;
  /** A routing preset (`least-load`, `kv-usage`, `sticky-program`, `prefix-affinity`, `cost-aware`) or a full filters/scorers config (default sticky-program, see DEFAULT_ROUTING). */
  routing?: string | RoutingConfig;
  /**
   * Call id generator (default time-ordered UUIDs, version 7, stamped by the gateway's clock: a store's index on
   * call ids then grows at its end instead of touching a random page per call; the simulator passes a seeded one).
   */
  newCallId?: () => string;
  /** Largest accepted request body, bytes (default 32 MiB: agent contexts get long); larger → 413. */
  bodyLimitBytes?: number;
  /**
   * Program keys and admin token. Absent (default): every route is open, so bind only 127.0.0.1.
   * Present: /programs, release and /admin/* need the admin token; a program key reaches only its own
   * program's inference routes, entry and trace (403 otherwise, 401 without a valid credential).
   */
  auth?: AuthConfig;
  /**
   * A gateway of a deployment, which may restart (or be one of several): program keys are derived from the admin
   * token, {@link Gateway.restore} takes back the programs active in the store, and `close()` leaves them active
   * for the gateway that serves them next, instead of ending them as aborted.
   */
  restorable?: { activePrograms(): Promise<{ id: string; calls: number }[]> };
  /** Per-program concurrency and request-rate limits (default none); beyond them → 429. */
  limits?: ProgramLimits;
  /** Where GET /programs/:id/trace reads a program's recorded calls (e.g. the trajectory store). */
  traceSource?: { callsOf(programId: string): Call[] | Promise<Call[]> };
  /** Program id for POST /programs without one (default time-ordered UUIDs, as call ids). */
  newProgramId?: () => string;
  /**
   * Release programs with no call in flight after this many ms without activity (default 600000,
   * ten minutes: a program whose agent vanished must not hold a table slot for good; 0 = off).
   */
  idleReleaseMs?: number;
  /** Time to receive a request and open connections at most (default DEFAULT_HTTP_LIMITS: 60 s, 20 s for headers, 4096). */
  httpLimits?: Partial<HttpLimits>;
  /**
   * Called once per program when it is released (explicitly or by idle timeout), e.g. so the sandbox
   * layer can collect the program's sandbox. A throwing or rejecting hook is logged to stderr and ignored.
   */
  onProgramTerminated?: (programId: string, reason: ReleaseReason) => void | Promise<void>;
  /**
   * Health checking: backends in rotation are checked every `intervalMs` (default: not checked
   * until a call fails), backends out of rotation every `recheckMs` (default 1000) until a check
   * passes. A failed call or check takes a backend out of rotation.
   */
  health?: { intervalMs?: number; recheckMs?: number };
  /**
   * Serve calls to token backends with the engine's tokenizer on the token path (token-id prompts
   * built from each program's history; streamed calls too where the backend streams token ids;
   * default true). False: always pass through.
   */
  tokenPath?: boolean;
  /**
   * A max_tokens larger than the context leaves (the engine's context length minus the prompt's
   * tokens): `clamp` it to what the context leaves and record the clamp on the call (default), or
   * `refuse` the call with a 400 naming the field. Passthrough calls are fitted alike where the
   * backend has the engine's tokenizer (passthrough-budget.ts), else go as sent.
   */
  maxTokensPolicy?: MaxTokensPolicy;
  /**
   * ThunderAgent pause/restore (pausing/pause-gate.ts): with `enabled`, calls pass the pause gate,
   * which places programs, pauses them when a backend's KV is oversubscribed and holds their calls.
   */
  pausing?: PauseGateConfig & { enabled?: boolean };
  /** Seer divided rollout on the token path: generations go out in chunks on the backend with most free KV. */
  dividedRollout?: { chunkTokens: number; maxChunks?: number };
  /** Extra readiness checks for GET /readyz (e.g. the store of `arbor serve gateway`): why it cannot serve, or undefined. */
  notReady?: () => Promise<string | undefined> | string | undefined;
}

export interface Gateway {
  app: FastifyInstance;
  table: ProgramTable;
  router: PluginRouter;
  /** Prometheus metrics (own registry), also served at GET /metrics. */
  metrics: GatewayMetrics;
  /** Listen and return the base URL, e.g. http://127.0.0.1:41234. */
  listen(host: string, port: number): Promise<string>;
  close(): Promise<void>;
  /** Health-check every backend; throws the first failure as a one-line ArborError. */
  checkBackends(): Promise<void>;
  /** Backend rotation: which backends are in, and the checks that move them. */
  health: HealthLoop;
  /** GET /healthz, GET /readyz and the drain: draining refuses new programs and calls of programs not held here (503). */
  probes: ServiceProbes;
  /** With `restorable`: take back every program active in the store (with its key); resolves with how many. */
  restore(): Promise<number>;
}

/** Build the gateway (not yet listening). */
export function createGateway(opts: GatewayOptions): Gateway {
  const clock = opts.clock ?? realClock;
  const newTimeOrderedId = (): string => timeOrderedId(clock.now());
  const maxTokensPolicy = opts.maxTokensPolicy ?? "clamp";
  if (!MAX_TOKENS_POLICIES.includes(maxTokensPolicy)) {
    throw new ArborError(`maxTokensPolicy: must be one of ${MAX_TOKENS_POLICIES.join(", ")}, got ${JSON.stringify(maxTokensPolicy)}`, "config");
  }
  const callTimeoutMs = opts.callTimeoutMs ?? 120_000;
  if (!(Number.isInteger(callTimeoutMs) && callTimeoutMs >= 1)) {
    throw new ArborError(`callTimeoutMs: must be an integer >= 1, got ${callTimeoutMs}`, "config");
  }
  const backends = new Map(opts.backends.map((b) => [b.name, b]));
  const router = createPluginRouter(
    opts.backends.map((b) => b.name),
    resolveRoutingConfig(opts.routing),
  );
  const idleReleaseMs = opts.idleReleaseMs ?? DEFAULT_IDLE_RELEASE_MS;
  const sink = opts.store ?? opts.sink;
  if (!sink) throw new ArborError("gateway: needs a store or a sink to record calls into", "config");
  const table = new ProgramTable({
    clock,
    maxPrograms: opts.maxPrograms ?? 1024,
    ...(idleReleaseMs !== 0 ? { idleReleaseMs } : {}),
    ...(opts.store ? { store: opts.store } : {}),
    ...(opts.runId !== undefined ? { runId: opts.runId } : {}),
    onStoreError: (id, e) => process.stderr.write(`gateway: program '${id}' could not be ended in the store: ${e.message}\n`),
  });
  const httpLimits = resolveHttpLimits(opts.httpLimits, "gateway");
  const metrics = new GatewayMetrics(table);
  const healthMetrics = createHealthMetrics(metrics.registry, opts.backends.map((b) => b.name));
  const attemptsOn = new Map<string, Set<AbortController>>();
  // The gate reads backend capacities at start: created now, awaited by listen() and by each call.
  const gateReady: Promise<CallGate> | undefined = opts.pausing?.enabled
    ? PauseGate.create({ backends: opts.backends, clock, registry: metrics.registry, config: opts.pausing })
    : undefined;
  gateReady?.catch(() => undefined);
  const health = new HealthLoop({
    backends: opts.backends.map((b) => b.name),
    ...opts.health,
    clock,
    check: (name) => (backends.get(name) as Backend).health(),
    onTransition: (t) => {
      router.setHealthy(t.backend, t.up);
      void gateReady?.then((g) => g.setBackendUp(t.backend, t.up), () => undefined);
      healthMetrics.up.set({ backend: t.backend }, t.up ? 1 : 0);
      // An operator reads an outage in the gateway's log, not only in a counter.
      if (t.up) {
        opts.logger?.info(`backend ${t.backend} back in rotation (a health check passed)`);
        return;
      }
      opts.logger?.warn(`backend ${t.backend} out of rotation: ${t.cause ?? "failed"}`);
      healthMetrics.downs.inc({ backend: t.backend });
      const b = backends.get(t.backend) as Backend;
      for (const ac of attemptsOn.get(t.backend) ?? []) ac.abort(new BackendUnreachableError(b.name, b.url, `taken out of rotation: ${t.cause ?? "failed"}`));
    },
  });
  health.start();
  // On close, cut keep-alive connections at once: shutting down must not wait for idle clients.
  const bodyLimit = opts.bodyLimitBytes ?? 32 * 1024 * 1024;
  const app = Fastify({
    ...fastifyLogger(opts.logger),
    bodyLimit,
    forceCloseConnections: true,
    // Path ids may be as long as the program table accepts (256 characters), percent-encoded (×3).
    routerOptions: { maxParamLength: 3 * MAX_PROGRAM_ID_CHARS },
    ...fastifyHttpLimitOptions(httpLimits, (status, message, code) => openAiError(message, openAiErrorType(status), null, code)),
  });
  limitConnections(app.server, httpLimits);
  const keys = new ProgramKeyTable({ maxKeys: opts.maxPrograms ?? 1024, ...(opts.restorable && opts.auth ? { secret: opts.auth.adminToken } : {}) });
  const auth = opts.auth ? new GatewayAuth(opts.auth, keys) : undefined;
  const ctx: GatewayContext = {
    clock,
    callTimeoutMs,
    newCallId: opts.newCallId ?? newTimeOrderedId,
    backendList: opts.backends,
    backends,
    router,
    table,
    metrics,
    healthMetrics,
    health,
    sink,
    tokenPath: opts.tokenPath !== false,
    maxTokensPolicy,
    history: new Map(),
    contexts: new Map(),
    attemptsOn,
    gateReady,
    divided: opts.dividedRollout ? dividedRolloutFromConfig(opts.dividedRollout, opts.backends.filter(isTokenBackend)) : null,
    streamSurfaces: new WeakMap(),
    auth,
    keys,
    limiter: new ProgramLimiter(clock, opts.limits),
  };
  const release = programRelease(ctx, opts.onProgramTerminated);

  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof GatewayRejection) return reply.code(err.status).headers(err.headers).send(err.body());
    const fastifyStatus = (err as { statusCode?: number }).statusCode;
    if (fastifyStatus === 413) {
      return reply
        .code(413)
        .send(openAiError(`request body is larger than the gateway's limit of ${bodyLimit} bytes`, "invalid_request_error", null, "request_too_large"));
    }
    if (!(err instanceof ArborError) && fastifyStatus !== undefined && fastifyStatus >= 400 && fastifyStatus < 500) {
      // fastify's own rejections: malformed JSON, wrong content type.
      const code = (err as { code?: string }).code ?? null;
      return reply.code(fastifyStatus).send(openAiError(`request body: ${err instanceof Error ? err.message : String(err)}`, "invalid_request_error", null, code));
    }
    const { status, body, headers } = toOpenAiError(err);
    return reply.code(status).headers(headers).send(body);
  });
  app.setNotFoundHandler((req, reply) =>
    reply
      .code(404)
      .send(
        openAiError(
          `no route ${req.method} ${req.url}; use /p/<program-id>/v1/chat/completions, /p/<program-id>/v1/completions or /v1/... with header '${PROGRAM_HEADER}'`,
          "invalid_request_error",
          null,
          "not_found",
        ),
      ),
  );

  // Credentials are checked before the body is read: a stranger cannot make the gateway parse 32 MiB.
  if (auth) {
    const inferenceRoute = /\/v1\/((chat\/)?completions|responses|messages(\/count_tokens)?)$/;
    app.addHook("onRequest", async (req) => {
      const route = req.routeOptions.url;
      const headers = req.headers as CredentialHeaders;
      const params = req.params as { id?: string; programId?: string };
      if (route === "/health" || route === "/healthz" || route === "/readyz") return;
      if (route === undefined) {
        if (/^\/(admin|programs|runs)(\/|$|\?)/.test(req.url)) auth.requireAdmin(headers);
        return;
      }
      if (route === "/programs" || route === "/programs/:id/release" || route === "/runs" || route === "/runs/:id/end" || route.startsWith("/admin")) return auth.requireAdmin(headers);
      if (route === "/programs/:id" || route === "/programs/:id/trace") return auth.requireProgramReader(headers, params.id ?? "");
      if (route.endsWith("/v1/models")) return auth.requireAnyCaller(headers);
      if (inferenceRoute.test(route)) {
        const header = programHeader(req.headers[PROGRAM_HEADER]);
        const early = params.programId ?? (header !== "" ? header : undefined);
        // The handler checks the final id again (the body may name it too, and must agree).
        if (early !== undefined) auth.requireCaller(headers, early);
        // Named only in the body: the caller must authenticate before that body is read.
        else auth.requireBodyNamedCaller(headers);
        return;
      }
      auth.requireAdmin(headers);
    });
  }

  const probes = registerServiceProbes(app, {
    clock,
    notReady: () => gatewayNotReady({ backends: opts.backends, health, clock, ...(opts.notReady ? { extra: opts.notReady } : {}) }),
    refuseWhileDraining: (req) => drainingRefusal(req, table),
  });

  // Before any handler reads the body: its shape is bounded (a body nesting 50,000 arrays would
  // overflow JSON.stringify on its way to a backend, which then looked like a dead backend).
  app.addHook("preValidation", async (req) => {
    const body = req.body;
    if (typeof body !== "object" || body === null) return;
    const violation = jsonShapeViolation(body);
    if (violation) throw new InvalidRequestError(violation.param, violation.reason);
    const tools = (body as { tools?: unknown }).tools;
    if (Array.isArray(tools) && tools.length > MAX_TOOLS) {
      throw new InvalidRequestError("tools", `${tools.length} tools given; at most ${MAX_TOOLS} are supported (OpenAI's limit)`);
    }
  });
  app.addHook("onSend", async (req, reply, payload) => {
    // Every 429 says when to try again, whichever layer refused (table, limiter, an engine's 429 relayed).
    if (reply.statusCode === 429 && !reply.hasHeader("retry-after")) reply.header("retry-after", String(CAPACITY_RETRY_AFTER_S));
    // Every error on the Anthropic surface in Anthropic's shape, whoever produced it (auth, limits,
    // fastify's parser, an engine's own 4xx relayed as is).
    if (reply.statusCode < 400 || typeof payload !== "string" || !/\/v1\/messages(\/count_tokens)?$/.test(req.routeOptions.url ?? "")) return payload;
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      return payload;
    }
    const body = asAnthropicErrorBody(reply.statusCode, parsed);
    return body ? JSON.stringify(body) : payload;
  });

  async function inference(endpoint: Endpoint, req: ProgramRequest, reply: FastifyReply): Promise<unknown> {
    const start = clock.now();
    const prepared = prepareRequest(endpoint, req.body);
    return admitted(ctx, req, prepared, (programId) => serveCall(ctx, { endpoint, prepared, programId, start, reply }));
  }

  async function models(): Promise<unknown> {
    let lastError: unknown;
    for (const b of opts.backends) {
      try {
        return await b.models();
      } catch (e) {
        lastError = e;
      }
    }
    throw lastError;
  }

  const { messages, responses } = surfaceRoutes(ctx);
  for (const prefix of ["/p/:programId/v1", "/v1"]) {
    app.post(`${prefix}/responses`, (req: ProgramRequest, reply) => responses(req, reply));
    app.post(`${prefix}/messages`, (req: ProgramRequest, reply) => messages(req, reply));
    app.post(`${prefix}/messages/count_tokens`, (req: ProgramRequest, reply) => countTokens(ctx, req, reply));
    app.post(`${prefix}/chat/completions`, (req: ProgramRequest, reply) => inference("chat", req, reply));
    app.post(`${prefix}/completions`, (req: ProgramRequest, reply) => inference("completions", req, reply));
    app.get(`${prefix}/models`, () => models());
  }

  app.get("/health", async () => ({ status: "ok" }));
  registerProgramRoutes(app, ctx, { traceSource: opts.traceSource, newProgramId: opts.newProgramId ?? newTimeOrderedId, release });
  registerRunRoutes(app, opts.store, clock, () => `run-${newTimeOrderedId()}`);
  app.get("/metrics", async (_req, reply) => {
    const text = await metrics.registry.metrics();
    return reply.header("content-type", metrics.registry.contentType).send(text);
  });

  // The idle sweep re-arms itself for the moment the next program could expire (never later).
  let idleTimer: Timer | undefined;
  function armIdleSweep(): void {
    const wait = table.nextIdleCheckMs();
    if (wait === undefined) return;
    idleTimer = clock.setTimer(wait, () => {
      for (const id of table.releaseIdle()) {
        release.forget(id);
        release.terminated(id, "idle");
      }
      armIdleSweep();
    });
  }

  return {
    app,
    table,
    router,
    metrics,
    async listen(host, port) {
      // A pause gate that could not start (e.g. a backend without a known capacity) fails start-up.
      await gateReady;
      await app.listen({ host, port });
      idleTimer?.cancel();
      armIdleSweep();
      const addr = app.server.address();
      if (!addr || typeof addr === "string") throw new ArborError(`gateway: could not listen on ${host}:${port}`);
      return `http://${host.includes(":") ? `[${host}]` : host}:${addr.port}`;
    },
    close: async () => {
      health.stop();
      idleTimer?.cancel();
      idleTimer = undefined;
      const gate = await gateReady?.catch(() => undefined);
      await gate?.close();
      await app.close();
      // Every program ends with one recorded outcome, and nothing is left half-written for the store's owner to
      // close; a restorable gateway leaves its programs active for the gateway that restores them.
      if (!opts.restorable) table.endAll({ kind: "aborted", detail: "the gateway closed while the program was active" });
      await table.drain();
    },
    restore: async () => {
      if (!opts.restorable) throw new ArborError("gateway: restore() needs the restorable option", "config");
      const active = await opts.restorable.activePrograms();
      for (const p of active) {
        table.restore(p.id, p.calls);
        if (opts.auth) keys.restore(p.id);
      }
      return active.length;
    },
    checkBackends: () => checkBackends(opts.backends),
    health,
    probes,
  };
}

/**
 * While the gateway drains, new work goes elsewhere: no new program, and no call of a program this
 * gateway does not hold (another replica, or a load balancer's retry, takes it); its own programs finish.
 */
function drainingRefusal(req: FastifyRequest, table: ProgramTable): string | undefined {
  const route = req.routeOptions.url ?? "";
  if (req.method === "POST" && route === "/programs") return "gateway is draining: no new programs";
  if (!/\/v1\/((chat\/)?completions|responses|messages)$/.test(route)) return undefined;
  const header = req.headers[PROGRAM_HEADER];
  const bodyId = (req.body as { program_id?: unknown } | undefined)?.program_id;
  const id = (req.params as { programId?: string }).programId ?? (typeof header === "string" && header !== "" ? header : typeof bodyId === "string" ? bodyId : undefined);
  if (id !== undefined && table.get(id)?.state === "active") return undefined;
  return `gateway is draining: program '${id ?? "(none)"}' is not active here`;
}
