// Least-loaded routing: the backend with the fewest in-flight calls; ties go round-robin so equal
// backends share load deterministically.
import { ArborError } from "../core/errors.js";
import type { RoutingCandidate, RoutingPolicy } from "./router.js";

/** Create a least-loaded {@link RoutingPolicy} (stateful: remembers where the last tie went). */
export function createLeastLoadedPolicy(): RoutingPolicy {
  // Position (in candidate order) just after the last pick; ties resolve from here onwards.
  let cursor = 0;
  return {
    name: "least-loaded",
    pick(candidates: readonly RoutingCandidate[]): string {
      if (candidates.length === 0) throw new ArborError("least-loaded: no backend to route to", "routing");
      let best = -1;
      let bestLoad = Infinity;
      for (let k = 0; k < candidates.length; k++) {
        const i = (cursor + k) % candidates.length;
        const c = candidates[i] as RoutingCandidate;
        if (c.inFlight < bestLoad) {
          best = i;
          bestLoad = c.inFlight;
        }
      }
      cursor = (best + 1) % candidates.length;
      return (candidates[best] as RoutingCandidate).name;
    },
  };
}
