// Scorer: fewest requests in flight or queued at the gateway (llm-d's queue scorer).
import { lowerIsBetter } from "./normalize.js";
import { requestLoad, type RoutingScorer } from "./types.js";

/** Create the `least-load` scorer. */
export function createLeastLoadScorer(): RoutingScorer {
  return { name: "least-load", score: (ctx) => lowerIsBetter(ctx.backends.map(requestLoad)) };
}
