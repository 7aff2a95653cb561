// Routing a call with a clear answer when nothing can take it: a 503 naming every backend and why.
import { ArborError } from "../core/errors.js";
import { GatewayRejection } from "./auth/auth-errors.js";
import type { GatewayContext } from "./gateway-context.js";
import type { RouteDecision } from "./routing/plugin-router.js";
import type { RoutingRequest } from "./routing/types.js";

/** Route a call; with every backend out of rotation, a 503 naming them and why. */
export function routeOrUnavailable(ctx: GatewayContext, req: RoutingRequest): RouteDecision {
  try {
    return ctx.router.route(req);
  } catch (e) {
    if (!(e instanceof ArborError && e.code === "no_backend")) throw e;
    const tracker = ctx.health.tracker;
    const down = ctx.backendList.map((b) => `'${b.name}'${tracker.isUp(b.name) ? "" : ` (out of rotation: ${tracker.causeOf(b.name) ?? "unhealthy"})`}`);
    throw new GatewayRejection(503, "server_error", "backend_unavailable", `no backend can take the call: ${e.message}; backends: ${down.join(", ")}`);
  }
}
