// Filter: drop backends whose KV cache cannot hold the prompt at all (hard), and backends whose
// KV usage is at or above `maxKvUsage` unless every backend is (soft: the engines then queue).
import { z } from "../../core/zod.js";
import { promptLengthOf, type BackendView, type RoutingFilter } from "./types.js";

export const CapacityFilterOptionsSchema = z
  .object({
    /** KV usage (0..1) from which a backend is avoided while a less full one exists. */
    maxKvUsage: z.number().gt(0).max(1).default(0.95),
  })
  .strict();
export type CapacityFilterOptions = z.input<typeof CapacityFilterOptionsSchema>;

/** Create the `capacity` filter. */
export function createCapacityFilter(options: CapacityFilterOptions = {}): RoutingFilter {
  const { maxKvUsage } = CapacityFilterOptionsSchema.parse(options);
  return {
    name: "capacity",
    filter(req, backends): BackendView[] {
      const need = promptLengthOf(req);
      const fits = backends.filter((b) => b.kvCapacityTokens === undefined || need <= b.kvCapacityTokens);
      const roomy = fits.filter((b) => b.kvUsage === undefined || b.kvUsage < maxKvUsage);
      return roomy.length > 0 ? roomy : fits;
    },
  };
}
