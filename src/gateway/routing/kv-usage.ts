// Scorer: emptiest KV cache (llm-d's kv-cache-utilization scorer): 1 − usage. Usage is the scraped
// value, else the router's own estimate (active tokens / capacity), else unknown (neutral 0.5).
import type { BackendView, RoutingScorer } from "./types.js";

/** KV usage of a backend in [0, 1], or undefined when neither scraped nor estimable. */
export function kvUsageOf(b: BackendView): number | undefined {
  if (b.kvUsage !== undefined) return Math.min(1, Math.max(0, b.kvUsage));
  if (b.kvCapacityTokens !== undefined && b.kvCapacityTokens > 0) {
    return Math.min(1, b.activeTokens / b.kvCapacityTokens);
  }
  return undefined;
}

/** Create the `kv-usage` scorer. */
export function createKvUsageScorer(): RoutingScorer {
  return {
    name: "kv-usage",
    score: (ctx) =>
      ctx.backends.map((b) => {
        const u = kvUsageOf(b);
        return u === undefined ? 0.5 : 1 - u;
      }),
  };
}
