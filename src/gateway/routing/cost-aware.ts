// Scorer: Dynamo's KV router cost (TECHNIQUES §B6), lowest cost wins:
//   cost = prefillLoadScale × prefill_blocks + active_decode_blocks + incoming_blocks
//   prefill_blocks = (active_prefill_tokens + max(prompt − overlap_blocks × block, 0)) / block
// Overlap comes from the router's approximate prefix trees (Dynamo's no-kv-events mode), counted in
// whole blocks as engines cache whole blocks. Dynamo's decode term adds only the request's blocks not
// already active on the worker; the router does not track active blocks, so it adds them all.
import { z } from "../../core/zod.js";
import { lowerIsBetter } from "./normalize.js";
import type { BackendView, RoutingScorer, ScoreContext } from "./types.js";

export const CostAwareOptionsSchema = z
  .object({
    /** Dynamo's kv_overlap_score_weight: weight of prefill work against decode load. */
    prefillLoadScale: z.number().min(0).default(1),
    /** KV block size in tokens for backends that do not report one (vLLM's default is 16). */
    blockSize: z.number().int().min(1).default(16),
  })
  .strict();
export type CostAwareOptions = z.input<typeof CostAwareOptionsSchema>;

/** Dynamo's cost of placing the request on each backend (aligned with `ctx.backends`). */
export function dynamoCosts(ctx: ScoreContext, options: CostAwareOptions = {}): number[] {
  const o = CostAwareOptionsSchema.parse(options);
  const isl = ctx.promptLength;
  const matched = ctx.prefixMatch();
  return ctx.backends.map((b: BackendView, i) => {
    const block = b.blockSize ?? o.blockSize;
    const overlapBlocks = Math.floor((matched[i] ?? 0) / block);
    const incomingBlocks = Math.ceil(isl / block);
    const prefillBlocks = (b.activePrefillTokens + Math.max(isl - overlapBlocks * block, 0)) / block;
    const decodeBlocks = Math.ceil(b.activeTokens / block);
    return o.prefillLoadScale * prefillBlocks + decodeBlocks + incomingBlocks;
  });
}

/** Create the `cost-aware` scorer: min-max normalised inverse of {@link dynamoCosts}. */
export function createCostAwareScorer(options: CostAwareOptions = {}): RoutingScorer {
  const o = CostAwareOptionsSchema.parse(options);
  return { name: "cost-aware", score: (ctx) => lowerIsBetter(dynamoCosts(ctx, o)) };
}
