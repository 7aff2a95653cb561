// Filter: only backends the health checker has in rotation.
import type { RoutingFilter } from "./types.js";

/** Create the `healthy` filter. */
export function createHealthyFilter(): RoutingFilter {
  return { name: "healthy", filter: (_req, backends) => backends.filter((b) => b.healthy) };
}
