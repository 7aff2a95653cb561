// Advantage estimators by name: the one place where they are registered and selected (config `train.estimator`).
import { ArborError } from "../../core/errors.js";
import { ADVANTAGE_SHAPING_KEYS, splitShapingOptions } from "../../core/estimator-options.js";
import { parseAdvantageShaping, withAdvantageShaping } from "./advantage-shaping.js";
import { createChunkedMdp } from "./chunked-mdp.js";
import { createCispo } from "./cispo.js";
import { createDapo } from "./dapo.js";
import { createDrGrpo } from "./dr-grpo.js";
import type { Estimator } from "./estimator.js";
import { createGrpo } from "./grpo.js";
import { createGspo } from "./gspo.js";
import { createRewardToGo } from "./reward-to-go.js";

/** An estimator's factory and the names of its own options (every one a number), checked before it is called. */
interface Registered {
  create: (opts: Record<string, number>) => Estimator;
  options: readonly string[];
}

/** A registry entry; `options` must name every option of the factory's type and nothing else (checked by tsc). */
function registered<T extends object>(create: (opts?: T) => Estimator, options: { [K in keyof Required<NoInfer<T>>]: true }): Registered {
  return { create: create as (opts: Record<string, number>) => Estimator, options: Object.keys(options).sort() };
}

const factories: Record<string, Registered> = {
  grpo: registered(createGrpo, { clip: true, clipRatioC: true, eps: true }),
  "dr-grpo": registered(createDrGrpo, { clip: true, clipRatioC: true, maxTokens: true }),
  dapo: registered(createDapo, { clipRatioC: true, eps: true, epsHigh: true, epsLow: true, maxTokens: true, overlongCache: true }),
  gspo: registered(createGspo, { eps: true, epsHigh: true, epsLow: true }),
  cispo: registered(createCispo, { eps: true, epsHigh: true }),
  "chunked-mdp": registered(createChunkedMdp, { clipRatioC: true, epsHigh: true, epsLow: true, gamma: true, mismatchThreshold: true }),
  "reward-to-go": registered(createRewardToGo, { clip: true, clipRatioC: true, gamma: true }),
};

/** Names of every registered estimator. */
export const ESTIMATOR_NAMES: readonly string[] = Object.keys(factories);

/**
 * Create the estimator `name` with its options: its own, and the advantage-shaping ones every estimator takes
 * (advantage-shaping.ts). Throws an {@link ArborError} listing the names for an unknown estimator, and naming the
 * option for one the estimator does not take (a misspelt option would otherwise be ignored) or a value not a number.
 */
export function createEstimator(name: string, options: Record<string, unknown> = {}): Estimator {
  const f = Object.hasOwn(factories, name) ? factories[name] : undefined;
  if (!f) throw new ArborError(`train.estimator: unknown estimator '${name}' (known: ${ESTIMATOR_NAMES.join(", ")})`, "config");
  const { shaping, rest } = splitShapingOptions(options);
  for (const [key, value] of Object.entries(rest)) {
    if (!f.options.includes(key)) {
      throw new ArborError(`train.estimatorOptions.${key}: not an option of estimator '${name}' (its own: ${f.options.join(", ")}; every estimator's: ${ADVANTAGE_SHAPING_KEYS.join(", ")})`, "config");
    }
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new ArborError(`train.estimatorOptions.${key}: must be a finite number, got ${JSON.stringify(value) ?? String(value)}`, "config");
    }
  }
  return withAdvantageShaping(f.create(rest as Record<string, number>), parseAdvantageShaping(shaping));
}
