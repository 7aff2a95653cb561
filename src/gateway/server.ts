// The gateway's HTTP shell (fastify): OpenAI-compatible routes addressed per program, routing to
// backends, and a token trace of every successful call. Decisions live in the I/O-free ProgramTable
// and Router; this file only wires requests to them. Open by default — listen on 127.0.0.1 only
// (the CLI's default) unless `auth` is configured: then program keys and an admin token guard it.
import { randomUUID } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import {
  BackendHttpError,
  BackendProtocolError,
  BackendUnreachableError,
  isTokenBackend,
  type Backend,
  type BackendReply,
  type GenerateRequest,
  type TokenBackend,
} from "../backends/backend.js";
import { isStreamingBackend, type BackendStreamReply } from "../backends/sse.js";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import type { Call, TraceSink } from "../core/types.js";
import { checkBackends } from "./check-backends.js";
import { CallTimeoutError, ClientClosedError, InvalidRequestError, openAiError, toOpenAiError } from "./http-errors.js";
import { prepareRequest, type Endpoint, type PreparedRequest } from "./openai-request.js";
import { GatewayMetrics, type ReleaseReason } from "./gateway-metrics.js";
import { ProgramTable } from "./program-table.js";
import type { PluginRouter } from "./routing/plugin-router.js";
import { createPluginRouter, resolveRoutingConfig, type RoutingConfig } from "./routing/registry.js";
import { StreamTrace } from "./stream-trace.js";
import { AnthropicError } from "./surfaces/anthropic-error.js";
import { anthropicToChat } from "./surfaces/anthropic-request.js";
import { chatToAnthropic } from "./surfaces/anthropic-response.js";
import { responsesToChat } from "./surfaces/responses-request.js";
import { chatToResponse } from "./surfaces/responses-response.js";
import { anthropicStreamSurface } from "./surfaces/anthropic-stream-surface.js";
import { responsesStreamSurface } from "./surfaces/responses-stream.js";
import { openAiStreamSurface, UpstreamStreamError, type StreamChunk, type StreamSurface } from "./surfaces/stream-surface.js";
import { extractTrace, TraceShapeError, withoutLogprobs, type ExtractedTrace } from "./trace-extract.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import { GatewayAuth, type AuthConfig, type CredentialHeaders } from "./auth/gateway-auth.js";
import { ProgramKeyTable } from "./auth/key-table.js";
import { ProgramLimiter, type ProgramLimits } from "./auth/program-limiter.js";
import { HealthLoop } from "./health/health-loop.js";
import { createHealthMetrics } from "./health/health-metrics.js";
import type { RouteDecision } from "./routing/plugin-router.js";
import type { ProgramContext } from "./token-path/context-prompt.js";
import { tokenSampling } from "./token-path/sampling.js";
import { runTokenCall, type Attempt } from "./token-path/token-call.js";
import { visibleChunk } from "./token-path/token-chunks.js";
import { openTokenStream, streamTokenAnswer, type OpenedTokenStream } from "./token-path/token-stream.js";
import { chatMessage, tokenAnswer } from "./token-path/token-response.js";
import { declaresTools, requestToolPlan } from "./token-path/tool-plan.js";
import type { ToolPlan } from "../model/tool-markup.js";
import { promptSource } from "./token-path/prompt-source.js";
import { textOnlyBody, textOnlyTrace } from "./token-path/text-only.js";
import type { CallGate } from "./pausing/call-gate.js";
import { PauseGate, type PauseGateConfig } from "./pausing/pause-gate.js";
import { dividedRolloutFromConfig } from "./divided/divided-rollout.js";

/** Header naming the program when the client uses the plain /v1 routes. */
export const PROGRAM_HEADER = "x-arbor-program";

export interface GatewayOptions {
  backends: Backend[];
  sink: TraceSink;
  clock?: Clock;
  /** Active programs at most (default 1024). */
  maxPrograms?: number;
  /** Limit for one upstream call, ms (default 120000); past it the client gets 504. */
  callTimeoutMs?: number;
  /** A routing preset (`least-load`, `kv-usage`, `sticky-program`, `prefix-affinity`, `cost-aware`) or a full filters/scorers config (default sticky-program, see DEFAULT_ROUTING). */
  routing?: string | RoutingConfig;
  /** Call id generator (default random UUIDs; the simulator passes a seeded one). */
  newCallId?: () => string;
  /** Largest accepted request body, bytes (default 32 MiB: agent contexts get long); larger → 413. */
  bodyLimitBytes?: number;
  /**
   * Program keys and admin token. Absent (default): every route is open, so bind only 127.0.0.1.
   * Present: /programs, release and /admin/* need the admin token; a program key reaches only its own
   * program's inference routes, entry and trace (403 otherwise, 401 without a valid credential).
   */
  auth?: AuthConfig;
  /** Per-program concurrency and request-rate limits (default none); beyond them → 429. */
  limits?: ProgramLimits;
  /** Where GET /programs/:id/trace reads a program's recorded calls (e.g. the trajectory store). */
  traceSource?: { callsOf(programId: string): Call[] };
  /** Program id for POST /programs without one (default random UUIDs). */
  newProgramId?: () => string;
  /** Release programs with no call in flight after this many ms without activity (default off). */
  idleReleaseMs?: number;
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
   * ThunderAgent pause/restore (pausing/pause-gate.ts): with `enabled`, calls pass the pause gate,
   * which places programs, pauses them when a backend's KV is oversubscribed and holds their calls.
   */
  pausing?: PauseGateConfig & { enabled?: boolean };
  /** Seer divided rollout on the token path: generations go out in chunks on the backend with most free KV. */
  dividedRollout?: { chunkTokens: number; maxChunks?: number };
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
}

type ProgramRequest = FastifyRequest<{ Params: { programId?: string } }>;

/** Build the gateway (not yet listening). */
export function createGateway(opts: GatewayOptions): Gateway {
  const clock = opts.clock ?? realClock;
  const callTimeoutMs = opts.callTimeoutMs ?? 120_000;
  if (!(Number.isInteger(callTimeoutMs) && callTimeoutMs >= 1)) {
    throw new ArborError(`callTimeoutMs: must be an integer >= 1, got ${callTimeoutMs}`, "config");
  }
  const newCallId = opts.newCallId ?? randomUUID;
  const backends = new Map(opts.backends.map((b) => [b.name, b]));
  const router = createPluginRouter(
    opts.backends.map((b) => b.name),
    resolveRoutingConfig(opts.routing),
  );
  // Each program's last context (prompt + output ids): the prefix its next prompt extends, which is
  // what prefix-aware routing matches against the backends' trees. Dropped on release.
  const history = new Map<string, number[]>();
  // Each program's latest recorded call, from which the token path continues (dropped on release).
  const contexts = new Map<string, ProgramContext>();
  const table = new ProgramTable({ clock, maxPrograms: opts.maxPrograms ?? 1024, idleReleaseMs: opts.idleReleaseMs });
  const metrics = new GatewayMetrics(table);
  const healthMetrics = createHealthMetrics(metrics.registry, opts.backends.map((b) => b.name));
  // Token-path attempts in flight per backend: aborted (and retried elsewhere) when it goes down.
  const attemptsOn = new Map<string, Set<AbortController>>();
  const health = new HealthLoop({
    backends: opts.backends.map((b) => b.name),
    ...opts.health,
    clock,
    check: (name) => (backends.get(name) as Backend).health(),
    onTransition: (t) => {
      router.setHealthy(t.backend, t.up);
      healthMetrics.up.set({ backend: t.backend }, t.up ? 1 : 0);
      if (t.up) return;
      healthMetrics.downs.inc({ backend: t.backend });
      const b = backends.get(t.backend) as Backend;
      for (const ac of attemptsOn.get(t.backend) ?? []) ac.abort(new BackendUnreachableError(b.name, b.url, `taken out of rotation: ${t.cause ?? "failed"}`));
    },
  });
  health.start();
  const tokenBackends = opts.backends.filter(isTokenBackend);
  // The gate reads backend capacities at start: created now, awaited by listen() and by each call.
  const gateReady: Promise<CallGate> | undefined = opts.pausing?.enabled
    ? PauseGate.create({ backends: opts.backends, clock, registry: metrics.registry, config: opts.pausing })
    : undefined;
  gateReady?.catch(() => undefined);
  const divided = opts.dividedRollout ? dividedRolloutFromConfig(opts.dividedRollout, tokenBackends) : null;
  // On close, cut keep-alive connections at once: shutting down must not wait for idle clients.
  const bodyLimit = opts.bodyLimitBytes ?? 32 * 1024 * 1024;
  const app = Fastify({ logger: false, bodyLimit, forceCloseConnections: true });
  const keys = new ProgramKeyTable({ maxKeys: opts.maxPrograms ?? 1024 });
  const auth = opts.auth ? new GatewayAuth(opts.auth, keys) : undefined;
  const limiter = new ProgramLimiter(clock, opts.limits);
  const newProgramId = opts.newProgramId ?? randomUUID;

  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof GatewayRejection) return reply.code(err.status).headers(err.headers).send(err.body());
    const fastifyStatus = (err as { statusCode?: number }).statusCode;
    if (fastifyStatus === 413) {
      return reply.code(413).send(openAiError(`request body is larger than the gateway's limit of ${bodyLimit} bytes`, "request_too_large"));
    }
    if (!(err instanceof ArborError) && fastifyStatus !== undefined && fastifyStatus >= 400 && fastifyStatus < 500) {
      // fastify's own rejections: malformed JSON, body too large, wrong content type.
      return reply.code(fastifyStatus).send(openAiError(err instanceof Error ? err.message : String(err), "invalid_request"));
    }
    const { status, body } = toOpenAiError(err);
    return reply.code(status).send(body);
  });
  app.setNotFoundHandler((req, reply) =>
    reply
      .code(404)
      .send(
        openAiError(
          `no route ${req.method} ${req.url}; use /p/<program-id>/v1/chat/completions, /p/<program-id>/v1/completions or /v1/... with header '${PROGRAM_HEADER}'`,
          "not_found",
        ),
      ),
  );

  // Credentials are checked before the body is read: a stranger cannot make the gateway parse 32 MiB.
  if (auth) {
    const inferenceRoute = /\/v1\/((chat\/)?completions|responses|messages)$/;
    app.addHook("onRequest", async (req) => {
      const route = req.routeOptions.url;
      const headers = req.headers as CredentialHeaders;
      const params = req.params as { id?: string; programId?: string };
      if (route === "/health") return;
      if (route === undefined) {
        if (/^\/(admin|programs)(\/|$|\?)/.test(req.url)) auth.requireAdmin(headers);
        return;
      }
      if (route === "/programs" || route === "/programs/:id/release" || route.startsWith("/admin")) return auth.requireAdmin(headers);
      if (route === "/programs/:id" || route === "/programs/:id/trace") return auth.requireProgramReader(headers, params.id ?? "");
      if (route.endsWith("/v1/models")) return auth.requireAnyCaller(headers);
      if (inferenceRoute.test(route)) {
        const header = req.headers[PROGRAM_HEADER];
        const early = params.programId ?? (typeof header === "string" && header !== "" ? header : undefined);
        // The body may name the program instead; the handler checks the final id again.
        if (early !== undefined) auth.requireCaller(headers, early);
        return;
      }
      auth.requireAdmin(headers);
    });
  }

  function programIdOf(req: ProgramRequest, bodyId: string | undefined): string {
    const header = req.headers[PROGRAM_HEADER];
    const given = [
      ["path", req.params.programId],
      [`header '${PROGRAM_HEADER}'`, typeof header === "string" ? header : undefined],
      ["body field program_id", bodyId],
    ].filter((g): g is [string, string] => g[1] !== undefined && g[1] !== "");
    const first = given[0];
    if (!first) {
      throw new InvalidRequestError(
        "program_id",
        `missing program id: call /p/<program-id>/v1/..., or send header '${PROGRAM_HEADER}: <program-id>' (or body field program_id)`,
      );
    }
    const other = given.find((g) => g[1] !== first[1]);
    if (other) {
      throw new InvalidRequestError("program_id", `${first[0]} says '${first[1]}' but ${other[0]} says '${other[1]}'`);
    }
    return first[1];
  }

  async function callUpstream(backend: Backend, endpoint: Endpoint, body: object, reply: FastifyReply): Promise<BackendReply> {
    const ac = new AbortController();
    const timer = clock.setTimer(callTimeoutMs, () => ac.abort(new CallTimeoutError(backend.name, callTimeoutMs)));
    // An agent killed mid-call must not keep the engine generating for nobody.
    const onClose = (): void => {
      if (!reply.raw.writableFinished) ac.abort(new ClientClosedError());
    };
    reply.raw.once("close", onClose);
    try {
      // An error answer is relayed as is (the engine is alive); only an unreachable one leaves rotation.
      return endpoint === "chat" ? await backend.chatCompletions(body, ac.signal) : await backend.completions(body, ac.signal);
    } catch (e) {
      if (e instanceof BackendUnreachableError) health.callFailed(backend.name, e.message);
      throw e;
    } finally {
      timer.cancel();
      reply.raw.off("close", onClose);
    }
  }

  async function inference(endpoint: Endpoint, req: ProgramRequest, reply: FastifyReply): Promise<unknown> {
    const start = clock.now();
    const prepared = prepareRequest(endpoint, req.body);
    return admitted(req, prepared, (programId) => serveCall(endpoint, prepared, programId, start, reply));
  }

  /** Resolve the call's program, check its caller, and hold a slot of its limits while `serve` runs. */
  async function admitted<T>(req: ProgramRequest, prepared: PreparedRequest, serve: (programId: string) => Promise<T>): Promise<T> {
    const programId = programIdOf(req, prepared.bodyProgramId);
    auth?.requireCaller(req.headers as CredentialHeaders, programId);
    const done = limiter.admit(programId);
    try {
      return await serve(programId);
    } finally {
      done();
    }
  }

  async function serveCall(
    endpoint: Endpoint,
    prepared: PreparedRequest,
    programId: string,
    start: number,
    reply: FastifyReply,
    surface: string = endpoint,
  ): Promise<unknown> {
    let route: { id: number; backend: string } | undefined;
    let status: number | undefined;
    try {
      const result = await serveRouted(endpoint, prepared, programId, start, reply, (r) => {
        route = r;
        metrics.inflight.inc({ backend: r.backend });
      });
      status = reply.raw.headersSent ? reply.raw.statusCode : reply.statusCode;
      return result;
    } catch (e) {
      status = e instanceof GatewayRejection ? e.status : toOpenAiError(e).status;
      throw e;
    } finally {
      const labels = { backend: route?.backend ?? "none", endpoint: surface };
      if (route) metrics.inflight.dec({ backend: route.backend });
      metrics.requests.inc({ ...labels, status: String(status ?? 500) });
      metrics.duration.observe(labels, Math.max(0, clock.now() - start) / 1000);
    }
  }

  async function serveRouted(
    endpoint: Endpoint,
    prepared: PreparedRequest,
    programId: string,
    start: number,
    reply: FastifyReply,
    onRouted: (route: { id: number; backend: string }) => void,
  ): Promise<unknown> {
    table.open(programId);
    const index = table.beginCall(programId);
    let route: { id: number; backend: string } | undefined;
    let trace: ExtractedTrace | undefined;
    let recorded = false;
    let gate: CallGate | undefined;
    try {
      const known = history.get(programId);
      let only: string | undefined;
      if (gateReady) {
        gate = await gateReady;
        // A paused program's call waits here; a client that goes away while held ends the wait.
        const held = new AbortController();
        const onClose = (): void => held.abort(new ClientClosedError());
        reply.raw.once("close", onClose);
        try {
          only = await gate.beforeCall(programId, known?.length ?? estimateTokens(prepared), held.signal, router.boundBackend(programId));
        } catch (e) {
          gate = undefined; // a rejected beforeCall needs no afterCall/onCallAbort
          throw e;
        } finally {
          reply.raw.off("close", onClose);
        }
      }
      route = routeOrUnavailable({ programId, ...(known ? { promptTokens: known } : {}), ...(only !== undefined ? { only } : {}) });
      onRouted(route);
      const backendName = route.backend;
      table.bind(programId, backendName);
      const backend = backends.get(backendName) as Backend;
      if (prepared.stream && usesTokenStream(backend, prepared)) {
        const first = route;
        // Like the token path, the streamed token path reports its attempts to the router itself.
        route = undefined;
        const served = await serveTokenStream(endpoint, prepared, programId, index, start, reply, first);
        recorded = served.recorded;
        return served.result;
      }
      if (prepared.stream) {
        const streamed = await relayStream(backend, endpoint, prepared, programId, index, start, reply);
        trace = streamed.trace;
        recorded = trace !== undefined;
        return streamed.result;
      }
      if (usesTokenPath(backend, prepared)) {
        const first = route;
        // The token path reports each of its attempts to the router itself.
        route = undefined;
        const served = await serveTokenPath(endpoint, prepared, programId, index, start, reply, first);
        recorded = served.recorded;
        return served.result;
      }
      const textOnly = isTokenBackend(backend) && !backend.capabilities.tokenIds;
      const upstream = await callUpstream(backend, endpoint, textOnly ? textOnlyBody(prepared) : prepared.upstreamBody, reply);
      if (upstream.status < 200 || upstream.status >= 300) {
        return reply.code(upstream.status).send(upstream.json);
      }
      if (textOnly) {
        // A generic provider without token ids: the call is recorded with its text, never trained on.
        trace = textOnlyTrace(upstream.json);
        const call = record(trace, newCallId(), backend, prepared, programId, index, start, { trainable: false });
        recorded = true;
        reply.header("x-arbor-call-id", call.id).header("x-arbor-call-index", String(index));
        return prepared.clientWantsLogprobs ? upstream.json : withoutLogprobs(upstream.json);
      }
      try {
        trace = extractTrace(endpoint, upstream.json);
      } catch (e) {
        if (e instanceof TraceShapeError) throw new BackendProtocolError(backend.name, backend.url, e.message);
        throw e;
      }
      const call = record(trace, newCallId(), backend, prepared, programId, index, start);
      recorded = true;
      reply.header("x-arbor-call-id", call.id).header("x-arbor-call-index", String(index));
      return prepared.clientWantsLogprobs ? upstream.json : withoutLogprobs(upstream.json);
    } finally {
      if (route !== undefined) {
        router.onFinished(
          route.id,
          recorded && trace ? { promptTokens: trace.promptTokenIds, outputTokens: trace.outputTokenIds, ok: true } : { outputTokens: 0, ok: false },
        );
      }
      if (!recorded) table.failCall(programId, index);
      if (gate) {
        const ctx = history.get(programId);
        if (recorded && ctx) gate.afterCall(programId, ctx.length);
        else gate.onCallAbort(programId);
      }
    }
  }

  /** A prompt-size estimate for a program's first call (no token history yet): ~4 characters a token. */
  function estimateTokens(prepared: PreparedRequest): number {
    const chars = prepared.messages.reduce((n, m) => n + m.content.length, 0);
    return Math.ceil(chars / 4);
  }

  /** Record one finished call in the sink and the program table; throws (unrecorded) when the sink fails. */
  function record(
    trace: ExtractedTrace,
    id: string,
    backend: Backend,
    prepared: PreparedRequest,
    programId: string,
    index: number,
    start: number,
    flags: Pick<Call, "trainable" | "contextReset"> = {},
  ): Call {
    const call: Call = {
      id,
      programId,
      index,
      messages: prepared.messages,
      promptTokenIds: trace.promptTokenIds,
      outputTokenIds: trace.outputTokenIds,
      logprobs: trace.logprobs,
      outputText: trace.outputText,
      finishReason: trace.finishReason,
      backend: backend.name,
      policyVersion: trace.policyVersion,
      timings: { start, end: clock.now() },
      ...flags,
    };
    try {
      opts.sink.recordCall(call);
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      throw new ArborError(`could not record call ${index} of program '${programId}': ${why}`, "record_failed");
    }
    table.endCall(programId, trace.promptTokenIds.length + trace.outputTokenIds.length);
    metrics.promptTokens.inc(trace.promptTokenIds.length);
    metrics.outputTokens.inc(trace.outputTokenIds.length);
    history.set(programId, [...trace.promptTokenIds, ...trace.outputTokenIds]);
    if (flags.trainable === false) {
      // No engine token ids to continue from: the next call starts afresh.
      history.delete(programId);
      contexts.delete(programId);
    } else {
      contexts.set(programId, {
        endpoint: prepared.endpoint,
        messages: prepared.messages,
        promptTokenIds: trace.promptTokenIds,
        outputTokenIds: trace.outputTokenIds,
        outputText: trace.outputText,
        finishReason: trace.finishReason,
        ...(Array.isArray(prepared.upstreamBody.tools) && prepared.upstreamBody.tools.length > 0 ? { tools: prepared.upstreamBody.tools } : {}),
      });
    }
    return call;
  }

  /** Route a call; with every backend out of rotation, a 503 naming them and why. */
  function routeOrUnavailable(req: { programId: string; promptTokens?: readonly number[] }): RouteDecision {
    try {
      return router.route(req);
    } catch (e) {
      if (!(e instanceof ArborError && e.code === "no_backend")) throw e;
      const down = opts.backends.map((b) => `'${b.name}'${health.tracker.isUp(b.name) ? "" : ` (out of rotation: ${health.tracker.causeOf(b.name) ?? "unhealthy"})`}`);
      throw new GatewayRejection(503, "server_error", "backend_unavailable", `no backend can take the call: ${e.message}; backends: ${down.join(", ")}`);
    }
  }

  /**
   * Whether `prepared` routed to `b` takes the token path: a token backend with the engine's
   * tokenizer. A chat request that declares tools also needs an engine whose tool-call format the
   * gateway can read from the generated ids: Arbor's own engine (the policy's markup, read by the
   * engine's own parser in model/tool-markup.ts). Other engines (vLLM, SGLang, llama-server) parse
   * calls with a model-specific tool parser the gateway does not know, so such requests go through
   * the passthrough, where the engine answers with its own tool_calls.
   */
  function usesTokenPath(b: Backend | undefined, prepared: PreparedRequest): b is TokenBackend {
    if (opts.tokenPath === false || b === undefined || !isTokenBackend(b)) return false;
    if (prepared.endpoint === "chat" && declaresTools(prepared.upstreamBody) && b.type !== "builtin") return false;
    return b.capabilities.tokenIds && typeof b.tokenize === "function" && typeof b.detokenize === "function";
  }

  /** One token-path attempt on route `r`: bounded by the call timeout, the client leaving and the backend going down. */
  function startTokenAttempt(r: { id: number; backend: string }, clientGone: AbortSignal): Attempt {
    const backend = backends.get(r.backend) as TokenBackend;
    const ac = new AbortController();
    const timer = clock.setTimer(callTimeoutMs, () => ac.abort(new CallTimeoutError(backend.name, callTimeoutMs)));
    const onGone = (): void => ac.abort(clientGone.reason);
    if (clientGone.aborted) onGone();
    else clientGone.addEventListener("abort", onGone, { once: true });
    const inFlight = attemptsOn.get(backend.name) ?? new Set<AbortController>();
    attemptsOn.set(backend.name, inFlight);
    inFlight.add(ac);
    return {
      routeId: r.id,
      backend,
      signal: ac.signal,
      done: () => {
        timer.cancel();
        clientGone.removeEventListener("abort", onGone);
        inFlight.delete(ac);
      },
    };
  }

  /**
   * Whether a streamed `prepared` routed to `b` takes the token path: as {@link usesTokenPath}, with
   * token streaming. Streamed calls generate on the routed backend in one piece (Seer's divided
   * rollout, which moves chunks between backends, applies to non-streamed calls only).
   */
  function usesTokenStream(b: Backend | undefined, prepared: PreparedRequest): b is TokenBackend {
    return usesTokenPath(b, prepared) && typeof b.generateStream === "function";
  }

  /**
   * A streamed call on the token path: the prompt is built as for {@link serveTokenPath}, the engine
   * streams token ids, and the gateway writes the chunks itself through the call's
   * {@link StreamSurface} (OpenAI chunks, or Anthropic / Responses events). Exactly one Call is
   * recorded when the answer is complete; a stream cut short (engine, client, timeout) records
   * nothing and cancels the engine's request.
   */
  async function serveTokenStream(
    endpoint: Endpoint,
    prepared: PreparedRequest,
    programId: string,
    index: number,
    start: number,
    reply: FastifyReply,
    first: { id: number; backend: string },
  ): Promise<{ recorded: boolean; result: unknown }> {
    let pending: { id: number; backend: string } | undefined = first;
    const callId = newCallId();
    const res = reply.raw;
    const clientGone = new AbortController();
    const onClose = (): void => {
      if (!res.writableFinished) clientGone.abort(new ClientClosedError());
    };
    res.once("close", onClose);
    const makeSurface = streamSurfaces.get(prepared);
    const surfaceFor = (backend: Backend): StreamSurface => makeSurface?.(backend, callId) ?? openAiStreamSurface();
    const gone = (): boolean => res.destroyed || res.writableEnded;
    const write = (frames: string, end = false): void => {
      if (gone()) return;
      if (!res.headersSent) {
        res.writeHead(200, {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache",
          connection: "keep-alive",
          "x-accel-buffering": "no",
          "x-arbor-call-id": callId,
          "x-arbor-call-index": String(index),
        });
      }
      if (end) res.end(frames);
      else if (frames !== "") res.write(frames);
    };
    try {
      let opened: OpenedTokenStream;
      let sampling: ReturnType<typeof tokenSampling>;
      let tools: ToolPlan | undefined;
      try {
        try {
          sampling = tokenSampling(endpoint, prepared.upstreamBody, prepared.clientWantsLogprobs);
          tools = endpoint === "chat" ? requestToolPlan(prepared.upstreamBody) : undefined;
        } catch (e) {
          router.onFinished(first.id, { outputTokens: 0, ok: false });
          pending = undefined;
          throw e;
        }
        opened = await openTokenStream(
          { programId, source: promptSource(endpoint, prepared), previous: contexts.get(programId), sampling },
          {
            route: (promptTokens, failed) => {
              let r = pending;
              pending = undefined;
              if (r === undefined) {
                r = routeOrUnavailable(promptTokens ? { programId, promptTokens } : { programId });
                if (failed.includes(r.backend) || !usesTokenStream(backends.get(r.backend), prepared)) {
                  router.onFinished(r.id, { outputTokens: 0, ok: false });
                  throw new ArborError(`routing offered only '${r.backend}', which cannot take it`, "no_backend");
                }
                table.bind(programId, r.backend);
              }
              return startTokenAttempt(r, clientGone.signal);
            },
            finished: (routeId) => router.onFinished(routeId, { outputTokens: 0, ok: false }),
            transportFailed: (name, cause) => health.callFailed(name, cause),
            retrying: (name) => healthMetrics.retries.inc({ backend: name }),
          },
        );
      } catch (e) {
        // Before the stream began: answered with a status, in the surface's shape (the engine's own 4xx as it sent it).
        const surface = surfaceFor(backends.get(first.backend) as Backend);
        if (e instanceof BackendHttpError && e.status < 500) {
          const body = e.body ?? openAiError(e.message, "upstream_error");
          return { recorded: false, result: reply.code(e.status).send(makeSurface ? surface.upstreamErrorBody(e.status, body) : body) };
        }
        if (!makeSurface) throw e;
        const { status, body } = surface.errorResponse(e);
        return { recorded: false, result: reply.code(status).send(body) };
      }
      // From here the gateway writes the response itself; nothing below may throw to fastify.
      reply.hijack();
      const surface = surfaceFor(opened.backend);
      const want = { logprobs: prepared.clientWantsLogprobs, tokenIds: prepared.clientWantsTokenIds };
      const streamOptions = prepared.upstreamBody.stream_options as { include_usage?: unknown } | null | undefined;
      let routed = false;
      try {
        const { result, text } = await streamTokenAnswer(
          opened,
          {
            endpoint,
            callId,
            created: Math.floor(clock.now() / 1000),
            model: sampling.model,
            logprobs: sampling.logprobs,
            includeUsage: streamOptions?.include_usage === true,
            ...(tools ? { tools } : {}),
          },
          (chunks) => {
            for (const c of chunks) write(surface.chunk(visibleChunk(c, want), c));
          },
        );
        const trace: ExtractedTrace = {
          promptTokenIds: opened.promptTokenIds,
          outputTokenIds: result.outputTokenIds,
          logprobs: result.logprobs,
          outputText: text,
          finishReason: result.finishReason,
          policyVersion: result.policyVersion ?? 0,
        };
        // Translated before recording: an answer the surface cannot close is a failed call.
        const closing = surface.finish();
        record(trace, callId, opened.backend, prepared, programId, index, start, opened.contextReset ? { contextReset: true } : {});
        routed = true;
        router.onFinished(opened.routeId, { promptTokens: trace.promptTokenIds, outputTokens: trace.outputTokenIds, ok: true });
        const context = contexts.get(programId);
        // The answer as the client got it: an agent sends its tool calls back in the next call.
        if (context && endpoint === "chat") {
          const { message } = chatMessage({ callId, result, decoded: { text }, ...(tools ? { tools } : {}) });
          const calls = message.tool_calls ?? [];
          context.answer = { content: message.content ?? "", toolCalls: calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) };
        }
        write(closing, true);
        return { recorded: true, result: undefined };
      } catch (err) {
        if (!routed) router.onFinished(opened.routeId, { outputTokens: 0, ok: false });
        if (err instanceof BackendUnreachableError) health.callFailed(opened.backend.name, err.message);
        if (!gone()) {
          if (!res.headersSent) {
            const { status, body } = surface.errorResponse(err);
            res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
            res.end(JSON.stringify(body));
          } else {
            write(surface.fail(err), true);
          }
        }
        return { recorded: false, result: undefined };
      } finally {
        opened.done();
      }
    } finally {
      if (pending !== undefined) router.onFinished(pending.id, { outputTokens: 0, ok: false });
      res.off("close", onClose);
    }
  }

  /**
   * A non-streaming call on the token path (token-path/): the gateway builds the token-id prompt
   * from the program's context, generates (retrying once elsewhere after a transport failure), and
   * records exactly the ids and logprobs the engine produced under a call id fixed up front.
   */
  async function serveTokenPath(
    endpoint: Endpoint,
    prepared: PreparedRequest,
    programId: string,
    index: number,
    start: number,
    reply: FastifyReply,
    first: { id: number; backend: string },
  ): Promise<{ recorded: boolean; result: unknown }> {
    let pending: { id: number; backend: string } | undefined = first;
    const callId = newCallId();
    const clientGone = new AbortController();
    const onClose = (): void => {
      if (!reply.raw.writableFinished) clientGone.abort(new ClientClosedError());
    };
    reply.raw.once("close", onClose);
    const startAttempt = (r: { id: number; backend: string }): Attempt => startTokenAttempt(r, clientGone.signal);
    try {
      if (pending === undefined) throw new ArborError("token path: no route", "routing");
      let sampling: ReturnType<typeof tokenSampling>;
      let tools: ToolPlan | undefined;
      try {
        sampling = tokenSampling(endpoint, prepared.upstreamBody, prepared.clientWantsLogprobs);
        tools = endpoint === "chat" ? requestToolPlan(prepared.upstreamBody) : undefined;
      } catch (e) {
        router.onFinished(first.id, { outputTokens: 0, ok: false });
        pending = undefined;
        throw e;
      }
      const out = await runTokenCall(
        { programId, source: promptSource(endpoint, prepared), previous: contexts.get(programId), sampling },
        {
          route: (promptTokens, failed) => {
            let r = pending;
            pending = undefined;
            if (r === undefined) {
              r = routeOrUnavailable(promptTokens ? { programId, promptTokens } : { programId });
              if (failed.includes(r.backend) || !usesTokenPath(backends.get(r.backend), prepared)) {
                router.onFinished(r.id, { outputTokens: 0, ok: false });
                throw new ArborError(`routing offered only '${r.backend}', which cannot take it`, "no_backend");
              }
              table.bind(programId, r.backend);
            }
            return startAttempt(r);
          },
          finished: (routeId, o) =>
            router.onFinished(routeId, o ? { promptTokens: o.promptTokenIds, outputTokens: o.result.outputTokenIds, ok: true } : { outputTokens: 0, ok: false }),
          ...(divided ? { generate: (_backend: TokenBackend, req: GenerateRequest) => divided.generate(req) } : {}),
          transportFailed: (name, cause) => health.callFailed(name, cause),
          retrying: (name) => healthMetrics.retries.inc({ backend: name }),
        },
      );
      const trace: ExtractedTrace = {
        promptTokenIds: out.promptTokenIds,
        outputTokenIds: out.result.outputTokenIds,
        logprobs: out.result.logprobs,
        outputText: out.decoded.text,
        finishReason: out.result.finishReason,
        // Engines that report no weights version (vLLM, SGLang, llama-server) record version 0.
        policyVersion: out.result.policyVersion ?? 0,
      };
      const call = record(trace, callId, out.backend, prepared, programId, index, start, out.contextReset ? { contextReset: true } : {});
      const { message } = chatMessage({ callId, result: out.result, decoded: out.decoded, ...(tools ? { tools } : {}) });
      const context = contexts.get(programId);
      // The answer as the client got it: an agent sends its tool calls back in the next call.
      if (context && endpoint === "chat") {
        const calls = message.tool_calls ?? [];
        context.answer = { content: message.content ?? "", toolCalls: calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) };
      }
      reply.header("x-arbor-call-id", call.id).header("x-arbor-call-index", String(index));
      const answer = tokenAnswer({
        endpoint,
        callId,
        created: Math.floor(clock.now() / 1000),
        model: sampling.model,
        promptTokenIds: out.promptTokenIds,
        result: out.result,
        decoded: out.decoded,
        logprobs: sampling.logprobs,
        ...(tools ? { tools } : {}),
      });
      return { recorded: true, result: answer };
    } catch (e) {
      // The engine refused the request itself (a 4xx): the client gets its answer as is.
      if (e instanceof BackendHttpError && e.status < 500) {
        return { recorded: false, result: reply.code(e.status).send(e.body ?? openAiError(e.message, "upstream_error")) };
      }
      throw e;
    } finally {
      if (pending !== undefined) router.onFinished(pending.id, { outputTokens: 0, ok: false });
      reply.raw.off("close", onClose);
    }
  }

  // The surface routes (messages, responses) name how their streamed answers are written; plain
  // chat and completions streams are relayed as OpenAI chunks.
  const streamSurfaces = new WeakMap<PreparedRequest, (backend: Backend, callId: string) => StreamSurface>();

  /**
   * Relay a streamed call event by event and record it once the upstream sends [DONE]. Each chunk
   * reaches the client through the call's {@link StreamSurface} (OpenAI chunks as they are, or the
   * Anthropic / Responses events a surface route registered in `streamSurfaces`). An error before
   * the stream starts is answered with its status (as for plain calls); after it, as the surface's
   * error event. A stream cut short (upstream, client or timeout) records nothing.
   */
  async function relayStream(
    backend: Backend,
    endpoint: Endpoint,
    prepared: PreparedRequest,
    programId: string,
    index: number,
    start: number,
    reply: FastifyReply,
  ): Promise<{ trace?: ExtractedTrace; result: unknown }> {
    const ac = new AbortController();
    const timer = clock.setTimer(callTimeoutMs, () => ac.abort(new CallTimeoutError(backend.name, callTimeoutMs)));
    const res = reply.raw;
    const onClose = (): void => {
      if (!res.writableFinished) ac.abort(new ClientClosedError());
    };
    res.once("close", onClose);
    const callId = newCallId();
    const surface = streamSurfaces.get(prepared)?.(backend, callId) ?? openAiStreamSurface();
    const gone = (): boolean => res.destroyed || res.writableEnded;
    const write = (frames: string, end = false): void => {
      if (gone()) return;
      if (!res.headersSent) {
        res.writeHead(200, {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache",
          connection: "keep-alive",
          "x-accel-buffering": "no",
          "x-arbor-call-id": callId,
          "x-arbor-call-index": String(index),
        });
      }
      if (end) res.end(frames);
      else if (frames !== "") res.write(frames);
    };
    try {
      let upstream: BackendStreamReply;
      try {
        if (!isStreamingBackend(backend)) throw new InvalidRequestError("stream", `backend '${backend.name}' cannot stream; send stream: false`);
        upstream = endpoint === "chat"
          ? await backend.chatCompletionsStream(prepared.upstreamBody, ac.signal)
          : await backend.completionsStream(prepared.upstreamBody, ac.signal);
      } catch (err) {
        // Surface routes answer in their own error shape; chat errors go to the OpenAI error handler.
        if (!streamSurfaces.has(prepared)) throw err;
        const { status, body } = surface.errorResponse(err);
        return { result: reply.code(status).send(body) };
      }
      if (!upstream.ok) return { result: reply.code(upstream.status).send(surface.upstreamErrorBody(upstream.status, upstream.json)) };
      // From here the gateway writes the response itself; nothing below may throw to fastify.
      reply.hijack();
      try {
        const st = new StreamTrace(endpoint, { clientWantsLogprobs: prepared.clientWantsLogprobs, clientWantsTokenIds: prepared.clientWantsTokenIds });
        let finished = false;
        for await (const data of upstream.events) {
          if (data === "[DONE]") {
            finished = true;
            break;
          }
          let chunk: unknown;
          try {
            chunk = JSON.parse(data);
          } catch {
            throw new BackendProtocolError(backend.name, backend.url, `streamed an event that is not JSON: ${data.slice(0, 200)}`);
          }
          // The engine failed mid-stream: pass its error on in the surface's shape; nothing is recorded.
          if (typeof chunk === "object" && chunk !== null && "error" in chunk) {
            write(surface.fail(new UpstreamStreamError(data, chunk)), true);
            return { result: undefined };
          }
          let visible: StreamChunk;
          try {
            visible = st.push(chunk);
          } catch (e) {
            if (e instanceof TraceShapeError) throw new BackendProtocolError(backend.name, backend.url, e.message);
            throw e;
          }
          write(surface.chunk(visible, chunk as StreamChunk));
        }
        if (ac.signal.aborted) throw ac.signal.reason;
        if (!finished) throw new BackendProtocolError(backend.name, backend.url, "ended the event stream without [DONE]");
        let trace: ExtractedTrace;
        try {
          trace = st.finish();
        } catch (e) {
          if (e instanceof TraceShapeError) throw new BackendProtocolError(backend.name, backend.url, e.message);
          throw e;
        }
        // Translated before recording: an answer the surface cannot close is a failed call.
        const closing = surface.finish();
        record(trace, callId, backend, prepared, programId, index, start);
        write(closing, true);
        return { trace, result: undefined };
      } catch (err) {
        if (!gone()) {
          if (!res.headersSent) {
            const { status, body } = surface.errorResponse(err);
            res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
            res.end(JSON.stringify(body));
          } else {
            write(surface.fail(err), true);
          }
        }
        return { result: undefined };
      }
    } finally {
      timer.cancel();
      res.off("close", onClose);
    }
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

  /**
   * Anthropic Messages (what Claude-Code-style agents speak), served through the chat path: the
   * request is translated to a chat completion, recorded like one, and the answer translated back;
   * streamed answers are relayed as Anthropic's message events.
   */
  async function messages(req: ProgramRequest, reply: FastifyReply): Promise<unknown> {
    const start = clock.now();
    let chatBody: ReturnType<typeof anthropicToChat>;
    try {
      chatBody = anthropicToChat(req.body);
    } catch (e) {
      if (e instanceof AnthropicError) return reply.code(e.status).send(e.body);
      throw e;
    }
    const prepared = prepareRequest("chat", chatBody);
    if (prepared.stream) streamSurfaces.set(prepared, () => anthropicStreamSurface(chatBody.model));
    return admitted(req, prepared, async (programId) => {
      const result = await serveCall("chat", prepared, programId, start, reply, "messages");
      // An upstream error was already sent as is.
      if (reply.sent) return reply;
      try {
        return chatToAnthropic(result as Parameters<typeof chatToAnthropic>[0], chatBody.model);
      } catch (e) {
        if (e instanceof AnthropicError) return reply.code(e.status).send(e.body);
        throw e;
      }
    });
  }

  /**
   * OpenAI Responses (the OpenAI Agents SDK's default API), served through the chat path like
   * messages(); streamed answers are relayed as Responses events.
   */
  async function responses(req: ProgramRequest, reply: FastifyReply): Promise<unknown> {
    const start = clock.now();
    const { chat, echo } = responsesToChat(req.body);
    const prepared = prepareRequest("chat", chat);
    if (prepared.stream) {
      streamSurfaces.set(prepared, (backend, callId) =>
        responsesStreamSurface(echo, Math.floor(clock.now() / 1000), callId, { backend: backend.name, url: backend.url }),
      );
    }
    return admitted(req, prepared, async (programId) => {
      const result = await serveCall("chat", prepared, programId, start, reply, "responses");
      if (reply.sent) return reply;
      const backend = backends.get(table.get(programId)?.backend ?? "");
      const callId = String(reply.getHeader("x-arbor-call-id") ?? "");
      return chatToResponse(result as Parameters<typeof chatToResponse>[0], echo, Math.floor(clock.now() / 1000), callId, {
        backend: backend?.name ?? "upstream",
        url: backend?.url ?? "",
      });
    });
  }

  for (const prefix of ["/p/:programId/v1", "/v1"]) {
    app.post(`${prefix}/responses`, (req: ProgramRequest, reply) => responses(req, reply));
    app.post(`${prefix}/messages`, (req: ProgramRequest, reply) => messages(req, reply));
    app.post(`${prefix}/chat/completions`, (req: ProgramRequest, reply) => inference("chat", req, reply));
    app.post(`${prefix}/completions`, (req: ProgramRequest, reply) => inference("completions", req, reply));
    app.get(`${prefix}/models`, () => models());
  }

  app.get("/health", async () => ({ status: "ok" }));
  app.get("/programs", async () => ({ programs: table.list() }));
  // The orchestrator creates a program and gets its key: shown here once, stored only as a hash.
  app.post("/programs", async (req: FastifyRequest<{ Body: unknown }>, reply) => {
    const body = req.body ?? {};
    if (typeof body !== "object" || Array.isArray(body)) throw new InvalidRequestError(null, "body: must be a JSON object like {\"id\": \"<program-id>\"} or empty");
    const given = (body as { id?: unknown }).id;
    if (given !== undefined && typeof given !== "string") throw new InvalidRequestError("id", `must be a string, got ${typeof given}`);
    const id = given ?? newProgramId();
    if (table.get(id) || keys.hasKey(id)) {
      throw new GatewayRejection(409, "invalid_request_error", "program_exists", `program '${id}' already exists; create each program once`);
    }
    table.open(id);
    let apiKey: string;
    try {
      apiKey = keys.issue(id);
    } catch (e) {
      table.release(id);
      throw e;
    }
    return reply.code(201).send({ id, api_key: apiKey });
  });
  app.get("/programs/:id", async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const entry = table.get(req.params.id);
    if (!entry) throw new ArborError(`program '${req.params.id}' is not known to the gateway`, "program_unknown");
    return entry;
  });
  app.get("/programs/:id/trace", async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const id = req.params.id;
    if (!opts.traceSource) {
      throw new GatewayRejection(501, "invalid_request_error", "trace_unavailable", "this gateway was started without a trace source; read traces from the trajectory store");
    }
    const calls = opts.traceSource.callsOf(id);
    if (calls.length === 0 && !table.get(id)) throw new ArborError(`program '${id}' is not known to the gateway`, "program_unknown");
    return { program_id: id, calls };
  });
  app.post("/programs/:id/release", async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const id = req.params.id;
    const wasActive = table.get(id)?.state === "active";
    const released = table.release(id);
    forget(id);
    if (wasActive) terminated(id, "released");
    return released;
  });
  app.get("/metrics", async (_req, reply) => {
    const text = await metrics.registry.metrics();
    return reply.header("content-type", metrics.registry.contentType).send(text);
  });

  /** Drop everything the gateway keeps for a released program besides its table tombstone. */
  function forget(id: string): void {
    history.delete(id);
    contexts.delete(id);
    router.releaseProgram(id);
    keys.release(id);
    limiter.forget(id);
    void gateReady?.then((g) => g.onRelease(id), () => undefined);
  }

  /** Count a termination and run the hook; a failing hook must not break the gateway. */
  function terminated(id: string, reason: ReleaseReason): void {
    metrics.released.inc({ reason });
    const hook = opts.onProgramTerminated;
    if (!hook) return;
    const report = (e: unknown): void => {
      process.stderr.write(`gateway: onProgramTerminated('${id}', ${reason}) failed: ${e instanceof Error ? e.message : String(e)}\n`);
    };
    try {
      const ran = hook(id, reason);
      if (ran instanceof Promise) ran.catch(report);
    } catch (e) {
      report(e);
    }
  }

  // The idle sweep re-arms itself for the moment the next program could expire (never later).
  let idleTimer: Timer | undefined;
  function armIdleSweep(): void {
    const wait = table.nextIdleCheckMs();
    if (wait === undefined) return;
    idleTimer = clock.setTimer(wait, () => {
      for (const id of table.releaseIdle()) {
        forget(id);
        terminated(id, "idle");
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
      return app.close();
    },
    checkBackends: () => checkBackends(opts.backends),
    health,
  };
}
