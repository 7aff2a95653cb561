// One admitted inference call, from the pause gate and routing (the I/O-free call path of
// call-path.ts, which the simulator runs too) to the path that serves it (token path, streamed
// token path, relayed stream or passthrough), with its request metrics.
import type { FastifyReply } from "fastify";
import { isTokenBackend, type Backend } from "../backends/backend.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import { beginCall, type PathCall } from "./call-path.js";
import { abortOnClientClose } from "./client-close.js";
import { inClientTerms } from "./client-fields.js";
import type { GatewayContext, RouteRef } from "./gateway-context.js";
import { toOpenAiError } from "./http-errors.js";
import type { Endpoint, PreparedRequest } from "./openai-request.js";
import { fitPassthroughBudget } from "./passthrough-budget.js";
import { callUpstream } from "./passthrough-call.js";
import { readTrace } from "./protocol-trace.js";
import { recordCall } from "./record-call.js";
import { relayStream } from "./relay-stream.js";
import { routeOrUnavailable } from "./route-or-unavailable.js";
import type { FinishedCall } from "./routing/plugin-router.js";
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
  const call: PathCall = {
    programId,
    start,
    estimateTokens: () => estimateTokens(prepared),
    route: (req) => routeOrUnavailable(ctx, req),
    holdSignal: () => {
      const held = new AbortController();
      return { signal: held.signal, detach: abortOnClientClose(reply.raw, held) };
    },
    onRouted,
  };
  // Ended in the same turn as the last serving step (finally below): the table, router and gate are
  // settled before the client can send its next call.
  const serving = await beginCall(ctx, call);
  try {
    const { place } = serving;
    const backend = ctx.backends.get(serving.route.backend) as Backend;
    const tokenServe = prepared.stream
      ? usesTokenStream(ctx, backend, prepared) && serveTokenStream
      : usesTokenPath(ctx, backend, prepared) && serveTokenPath;
    if (tokenServe) {
      // The token paths report each of their attempts to the router themselves.
      const served = await tokenServe(ctx, { endpoint, prepared, place, reply, first: serving.takeRoute() });
      if (served.recorded) serving.recorded();
      return served.result;
    }
    // Passthrough: the body goes as sent, its budget fitted where the engine's tokenizer tells the context.
    const budget = await fitPassthroughBudget(ctx, backend, prepared);
    if (budget.clamped) {
      prepared.upstreamBody = budget.body;
      prepared.maxTokensClamped = budget.clamped;
    }
    if (prepared.stream) {
      const streamed = await relayStream(ctx, backend, endpoint, prepared, place, reply);
      if (streamed.trace) serving.recorded(routerReport(streamed.trace));
      return streamed.result;
    }
    const textOnly = isTokenBackend(backend) && !backend.capabilities.tokenIds;
    const upstream = await callUpstream(ctx, backend, endpoint, textOnly ? textOnlyBody(prepared) : prepared.upstreamBody, reply);
    if (upstream.status < 200 || upstream.status >= 300) {
      return reply.code(upstream.status).send(inClientTerms(upstream.json, endpoint, prepared.clientNames));
    }
    // A generic provider without token ids: the call is recorded with its text, never trained on.
    const trace = textOnly ? textOnlyTrace(upstream.json) : readTrace(backend, () => extractTrace(endpoint, upstream.json));
    const recorded = recordCall(ctx, trace, ctx.newCallId(), backend, prepared, place, textOnly ? { trainable: false } : {});
    serving.recorded(routerReport(trace));
    reply.header("x-arbor-call-id", recorded.id).header("x-arbor-call-index", String(place.index));
    return prepared.clientWantsLogprobs ? upstream.json : withoutLogprobs(upstream.json);
  } finally {
    serving.end();
  }
}

/** What the router learns from a recorded call: its prompt and output, for the prefix tree. */
function routerReport(trace: ExtractedTrace): Omit<FinishedCall, "ok"> {
  return { promptTokens: trace.promptTokenIds, outputTokens: trace.outputTokenIds };
}

/** A prompt-size estimate for a program's first call (no token history yet): ~4 characters a token. */
function estimateTokens(prepared: PreparedRequest): number {
  const chars = prepared.messages.reduce((n, m) => n + m.content.length, 0);
  return Math.ceil(chars / 4);
}
