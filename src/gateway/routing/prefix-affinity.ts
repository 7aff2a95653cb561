// Scorer: SGLang router's cache_aware policy (TECHNIQUES §B6), over the router's per-backend
// approximate radix trees. Imbalanced load → least loaded; else the longest prefix match when its
// ratio exceeds the cache threshold; else the backend with the smallest tree (most room).
// Defaults are sgl-router's: cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5.
import { z } from "../../core/zod.js";
import { lowerIsBetter } from "./normalize.js";
import { requestLoad, type RoutingScorer } from "./types.js";

export const PrefixAffinityOptionsSchema = z
  .object({
    /** Match ratio (matched / prompt tokens) above which the best match wins. */
    cacheThreshold: z.number().min(0).max(1).default(0.3),
    /** Load is imbalanced when max − min exceeds this… */
    balanceAbsThreshold: z.number().min(0).default(64),
    /** …and max exceeds this times min. */
    balanceRelThreshold: z.number().min(1).default(1.5),
  })
  .strict();
export type PrefixAffinityOptions = z.input<typeof PrefixAffinityOptionsSchema>;

/** Which branch of the cache_aware rule applies. */
export type PrefixAffinityMode = "least-load" | "prefix-match" | "smallest-tree";

/** Create the `prefix-affinity` scorer. `lastMode` reports the branch of the latest score (for tests/metrics). */
export function createPrefixAffinityScorer(
  options: PrefixAffinityOptions = {},
): RoutingScorer & { readonly lastMode: PrefixAffinityMode | undefined } {
  const o = PrefixAffinityOptionsSchema.parse(options);
  let lastMode: PrefixAffinityMode | undefined;
  return {
    name: "prefix-affinity",
    get lastMode() {
      return lastMode;
    },
    score(ctx): number[] {
      const loads = ctx.backends.map(requestLoad);
      const max = Math.max(...loads);
      const min = Math.min(...loads);
      // Both conditions, as sgl-router: a large absolute gap that is also a large ratio.
      if (max - min > o.balanceAbsThreshold && max > o.balanceRelThreshold * min) {
        lastMode = "least-load";
        return lowerIsBetter(loads);
      }
      const matched = ctx.prefixMatch();
      const len = ctx.request.promptTokens?.length ?? 0;
      const best = Math.max(0, ...matched);
      if (len > 0 && best / len > o.cacheThreshold) {
        lastMode = "prefix-match";
        // Graded by match ratio, so the longest match scores highest and a weighted mix still sees
        // how close the others are.
        return matched.map((m) => m / len);
      }
      lastMode = "smallest-tree";
      return lowerIsBetter(ctx.backends.map((b) => b.treeTokens));
    },
  };
}
