// Scorer: keep a program on the backend of its previous call (verl AgentLoop): its KV is there.
// A program's first call (or one whose backend was filtered out) goes to the least loaded.
import { lowerIsBetter } from "./normalize.js";
import { requestLoad, type RoutingScorer } from "./types.js";

/** Create the `sticky-program` scorer. */
export function createStickyProgramScorer(): RoutingScorer {
  return {
    name: "sticky-program",
    score(ctx): number[] {
      const bound = ctx.boundBackend;
      if (bound !== undefined && ctx.backends.some((b) => b.name === bound)) {
        return ctx.backends.map((b) => (b.name === bound ? 1 : 0));
      }
      return lowerIsBetter(ctx.backends.map(requestLoad));
    },
  };
}
