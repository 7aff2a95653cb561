// The advantage-shaping options every estimator accepts (`train.estimatorOptions`), validated here so a bad
// value fails when the config is read (naming the field), and read again by the batch builder
// (batch/estimators/advantage-shaping.ts), which applies them after the estimator's own advantages:
// issue 20's asymmetric negative advantages, no reward for form in groups with no solved program, and
// positive-only (rejection-sampling) updates.
import { z } from "./zod.js";

export const AdvantageShapingSchema = z
  .object({
    /** Multiplies every negative advantage (1 = unchanged, 0 = positive-only without dropping samples). */
    negativeAdvantageScale: z.number().min(0, "must be >= 0 (a negative scale would flip the sign of a negative advantage)").max(1e6).optional(),
    /** Negative advantages below this (after the scale) are raised to it; must be <= 0. */
    negativeAdvantageFloor: z.number().max(0, "must be <= 0 (it bounds negative advantages from below)").optional(),
    /**
     * A group none of whose programs solved its task (outcome component < 1 for all) gets advantage 0 for every
     * program: what only the process reward (form) tells apart is not reinforced. Needs the `outcome` reward.
     */
    zeroAdvantageUnsolvedGroups: z.boolean().optional(),
    /** Rejection-sampling updates: samples whose advantages are all <= 0 are dropped, other advantages <= 0 become 0. */
    positiveOnly: z.boolean().optional(),
  })
  .strict();

export type AdvantageShaping = z.infer<typeof AdvantageShapingSchema>;

/**
 * A program solved its task when its `outcome` reward component (the env checker's score in [0, 1]) is at least
 * this: the checker's full score. Held-out evaluation counts solved programs the same way.
 */
export const SOLVED_OUTCOME = 1;

/** The option names {@link AdvantageShapingSchema} owns (every estimator accepts them beside its own). */
export const ADVANTAGE_SHAPING_KEYS: readonly string[] = Object.keys(AdvantageShapingSchema.shape);

/** `options` split into the shaping options and the estimator's own. */
export function splitShapingOptions(options: Record<string, unknown>): { shaping: Record<string, unknown>; rest: Record<string, unknown> } {
  const shaping: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(options)) (ADVANTAGE_SHAPING_KEYS.includes(k) ? shaping : rest)[k] = v;
  return { shaping, rest };
}
