// The routing and attempts of one token-path call, plain or streamed: the first route the call
// came with, re-routing for a retry, each attempt bounded by the call timeout, the client leaving
// and the backend going down, and every route reported to the router exactly once.
import type { ServerResponse } from "node:http";
import type { FastifyReply } from "fastify";
import type { Backend, TokenBackend } from "../backends/backend.js";
import { ArborError } from "../core/errors.js";
import type { ToolPlan } from "../model/tool-markup.js";
import { boundedCall } from "./client-close.js";
import type { GatewayContext, RouteRef } from "./gateway-context.js";
import type { Endpoint, PreparedRequest } from "./openai-request.js";
import type { CallPlace } from "./record-call.js";
import { routeOrUnavailable } from "./route-or-unavailable.js";
import { tokenSampling } from "./token-path/sampling.js";
import type { Attempt, TokenCallDeps } from "./token-path/token-call.js";
import { requestToolPlan } from "./token-path/tool-plan.js";

/** A call the gateway routed to `first` and serves on the token path. */
export interface RoutedTokenCall {
  endpoint: Endpoint;
  prepared: PreparedRequest;
  place: CallPlace;
  reply: FastifyReply;
  first: RouteRef;
}

export interface TokenRouting {
  /**
   * The request's sampling and tool plan; a request they reject gives its first route back
   * (reported failed) before the error is thrown.
   */
  plan(endpoint: Endpoint): { sampling: ReturnType<typeof tokenSampling>; tools: ToolPlan | undefined };
  /** The token call's routing dependencies (route, transportFailed, retrying). */
  deps: Pick<TokenCallDeps, "route" | "transportFailed" | "retrying">;
  /** Report a first route no attempt took as failed; call once, last. */
  close(): void;
}

/**
 * Routing for token-path call `call`. A retry routes again, and takes the new backend only where
 * `takes` says it can serve the call.
 */
export function tokenRouting(ctx: GatewayContext, call: RoutedTokenCall, takes: (b: Backend | undefined) => b is TokenBackend): TokenRouting {
  const { prepared } = call;
  const { programId } = call.place;
  let pending: RouteRef | undefined = call.first;
  const giveBack = (): void => {
    if (pending !== undefined) ctx.router.onFinished(pending.id, { outputTokens: 0, ok: false });
    pending = undefined;
  };
  return {
    plan(endpoint) {
      try {
        return {
          sampling: tokenSampling(endpoint, prepared.upstreamBody, prepared.clientWantsLogprobs, prepared.clientNames),
          tools: endpoint === "chat" ? requestToolPlan(prepared.upstreamBody) : undefined,
        };
      } catch (e) {
        giveBack();
        throw e;
      }
    },
    deps: {
      route: (promptTokens, failed) => {
        let r = pending;
        pending = undefined;
        if (r === undefined) {
          r = routeOrUnavailable(ctx, promptTokens ? { programId, promptTokens } : { programId });
          if (failed.includes(r.backend) || !takes(ctx.backends.get(r.backend))) {
            ctx.router.onFinished(r.id, { outputTokens: 0, ok: false });
            throw new ArborError(`routing offered only '${r.backend}', which cannot take it`, "no_backend");
          }
          ctx.table.bind(programId, r.backend);
        }
        return startTokenAttempt(ctx, r, call.reply.raw);
      },
      transportFailed: (name, cause) => ctx.health.callFailed(name, cause),
      retrying: (name) => ctx.healthMetrics.retries.inc({ backend: name }),
    },
    close: giveBack,
  };
}

/**
 * One token-path attempt on route `r`: bounded by the call timeout, the client leaving (`res` closing before
 * the answer was written: the attempt watches it itself, through the response's events rather than a second
 * AbortSignal per call, whose listeners cost more) and the backend going down.
 */
function startTokenAttempt(ctx: GatewayContext, r: RouteRef, res: ServerResponse): Attempt {
  const backend = ctx.backends.get(r.backend) as TokenBackend;
  const bounded = boundedCall(ctx, backend.name, res);
  const ac = bounded.controller;
  const inFlight = ctx.attemptsOn.get(backend.name) ?? new Set<AbortController>();
  ctx.attemptsOn.set(backend.name, inFlight);
  inFlight.add(ac);
  return {
    routeId: r.id,
    backend,
    signal: ac.signal,
    done: () => {
      bounded.done();
      inFlight.delete(ac);
    },
  };
}
