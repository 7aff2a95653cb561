// Routing plugin registry: config names (`gateway.routing`) to policy factories.
import { ArborError } from "../core/errors.js";
import { createLeastLoadedPolicy } from "./least-loaded.js";
import type { RoutingPolicy } from "./router.js";

const factories: Record<string, () => RoutingPolicy> = {
  "least-loaded": createLeastLoadedPolicy,
};

/** Names accepted by {@link createRoutingPolicy}. */
export const routingPolicyNames: readonly string[] = Object.keys(factories);

/** Create a fresh routing policy by name; unknown names list the known ones. */
export function createRoutingPolicy(name: string): RoutingPolicy {
  const factory = Object.hasOwn(factories, name) ? factories[name] : undefined;
  if (!factory) {
    throw new ArborError(`gateway.routing: unknown policy '${name}' (known: ${routingPolicyNames.join(", ")})`, "config");
  }
  return factory();
}
