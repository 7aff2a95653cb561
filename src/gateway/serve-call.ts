// One admitted inference call, from the pause gate and routing to the path that serves it
// (token path, streamed token path, relayed stream or passthrough), with its metrics and the
// router, table and gate told how it ended.
import type { FastifyReply } from "fastify";
import { isTokenBackend, type Backend } from "../backends/backend.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import { abortOnClientClose } from "./client-close.js";
import type { GatewayContext, RouteRef } from "./gateway-context.js";
import { toOpenAiError } from "./http-errors.js";
import type { Endpoint, PreparedRequest } from "./openai-request.js";
import { callUpstream } from "./passthrough-call.js";
import type { CallGate } from "./pausing/call-gate.js";
import { readTrace } from "./protocol-trace.js";
import { recordCall, type CallPlace } from "./record-call.js";
import { relayStream } from "./relay-stream.js";
import { routeOrUnavailable } from "./route-or-unavailable.js";
import { serveTokenPath } from "./serve-token-path.js";
import { serveTokenStream } from "./serve-token-stream.js";
import { usesTokenPath, usesTokenStream } from "./token-path-choice.js";
import { textOnlyBody, textOnlyTrace } from "./token-path/text-only.js";
import { extractTrace, withoutLogprobs, type ExtractedTrace } from "./trace-extract.js";

/** An admitted call: its program, when it arrived, and what the client asked on which route. */
export interface AdmittedCall {
  endpoint: Endpoint;
  prepared: PreparedRequest;
  programId: string;
  start: number;
  reply: FastifyReply;
  /** The route the client used, for the request metrics: chat, completions, messages, responses (default `endpoint`). */
  surface?: string;
}

/** Serve one admitted call and count it in the request metrics. */
export async function serveCall(ctx: GatewayContext, admitted: AdmittedCall): Promise<unknown> {
  const { endpoint, start, reply, surface = endpoint } = admitted;
  let route: RouteRef | undefined;
  let status: number | undefined;
  try {
    const result = await serveRouted(ctx, admitted, (r) => {
      route = r;
      ctx.metrics.inflight.inc({ backend: r.backend });
    });
    status = reply.raw.headersSent ? reply.raw.statusCode : reply.statusCode;
    return result;
  } catch (e) {
    status = e instanceof GatewayRejection ? e.status : toOpenAiError(e).status;
    throw e;
  } finally {
    const labels = { backend: route?.backend ?? "none", endpoint: surface };
    if (route) ctx.metrics.inflight.dec({ backend: route.backend });
    ctx.metrics.requests.inc({ ...labels, status: String(status ?? 500) });
    ctx.metrics.duration.observe(labels, Math.max(0, ctx.clock.now() - start) / 1000);
  }
}

async function serveRouted(ctx: GatewayContext, admitted: AdmittedCall, onRouted: (route: RouteRef) => void): Promise<unknown> {
  const { endpoint, prepared, programId, start, reply } = admitted;
  // Store-backed, an unknown or ended program is refused here, before anything reaches an engine.
  ctx.table.admit(programId);
  const place: CallPlace = { programId, index: ctx.table.beginCall(programId), start };
  let route: RouteRef | undefined;
  let trace: ExtractedTrace | undefined;
  let recorded = false;
  let gate: CallGate | undefined;
  try {
    const known = ctx.history.get(programId);
    let only: string | undefined;
    if (ctx.gateReady) {
      gate = await ctx.gateReady;
      // A paused program's call waits here; a client that goes away while held ends the wait.
      const held = new AbortController();
      const detach = abortOnClientClose(reply.raw, held);
      try {
        only = await gate.beforeCall(programId, known?.length ?? estimateTokens(prepared), held.signal, ctx.router.boundBackend(programId));
      } catch (e) {
        gate = undefined; // a rejected beforeCall needs no afterCall/onCallAbort
        throw e;
      } finally {
        detach();
      }
    }
    route = routeOrUnavailable(ctx, { programId, ...(known ? { promptTokens: known } : {}), ...(only !== undefined ? { only } : {}) });
    onRouted(route);
    const backendName = route.backend;
    ctx.table.bind(programId, backendName);
    const backend = ctx.backends.get(backendName) as Backend;
    const tokenServe = prepared.stream
      ? usesTokenStream(ctx, backend, prepared) && serveTokenStream
      : usesTokenPath(ctx, backend, prepared) && serveTokenPath;
    if (tokenServe) {
      const first = route;
      // The token paths report each of their attempts to the router themselves.
      route = undefined;
      const served = await tokenServe(ctx, { endpoint, prepared, place, reply, first });
      recorded = served.recorded;
      return served.result;
    }
    if (prepared.stream) {
      const streamed = await relayStream(ctx, backend, endpoint, prepared, place, reply);
      trace = streamed.trace;
      recorded = trace !== undefined;
      return streamed.result;
    }
    const textOnly = isTokenBackend(backend) && !backend.capabilities.tokenIds;
    const upstream = await callUpstream(ctx, backend, endpoint, textOnly ? textOnlyBody(prepared) : prepared.upstreamBody, reply);
    if (upstream.status < 200 || upstream.status >= 300) {
      return reply.code(upstream.status).send(upstream.json);
    }
    // A generic provider without token ids: the call is recorded with its text, never trained on.
    trace = textOnly ? textOnlyTrace(upstream.json) : readTrace(backend, () => extractTrace(endpoint, upstream.json));
    const call = recordCall(ctx, trace, ctx.newCallId(), backend, prepared, place, textOnly ? { trainable: false } : {});
    recorded = true;
    reply.header("x-arbor-call-id", call.id).header("x-arbor-call-index", String(place.index));
    return prepared.clientWantsLogprobs ? upstream.json : withoutLogprobs(upstream.json);
  } finally {
    if (route !== undefined) {
      ctx.router.onFinished(
        route.id,
        recorded && trace ? { promptTokens: trace.promptTokenIds, outputTokens: trace.outputTokenIds, ok: true } : { outputTokens: 0, ok: false },
      );
    }
    if (!recorded) ctx.table.failCall(programId, place.index);
    if (gate) {
      const context = ctx.history.get(programId);
      if (recorded && context) gate.afterCall(programId, context.length);
      else gate.onCallAbort(programId);
    }
  }
}

/** A prompt-size estimate for a program's first call (no token history yet): ~4 characters a token. */
function estimateTokens(prepared: PreparedRequest): number {
  const chars = prepared.messages.reduce((n, m) => n + m.content.length, 0);
  return Math.ceil(chars / 4);
}
