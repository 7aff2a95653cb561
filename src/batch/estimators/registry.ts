// Advantage estimators by name: the one place where they are registered and selected (config `batch.estimator`).
import { ArborError } from "../../core/errors.js";
import { splitShapingOptions } from "../../core/estimator-options.js";
import { parseAdvantageShaping, withAdvantageShaping } from "./advantage-shaping.js";
import { createChunkedMdp } from "./chunked-mdp.js";
import { createCispo } from "./cispo.js";
import { createDapo } from "./dapo.js";
import { createDrGrpo } from "./dr-grpo.js";
import type { Estimator } from "./estimator.js";
import { createGrpo } from "./grpo.js";
import { createGspo } from "./gspo.js";
import { createRewardToGo } from "./reward-to-go.js";

// Options are typed per factory; the registry accepts plain config objects.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const factories: Record<string, (opts?: any) => Estimator> = {
  grpo: createGrpo,
  "dr-grpo": createDrGrpo,
  dapo: createDapo,
  gspo: createGspo,
  cispo: createCispo,
  "chunked-mdp": createChunkedMdp,
  "reward-to-go": createRewardToGo,
};

/** Names of every registered estimator. */
export const ESTIMATOR_NAMES: readonly string[] = Object.keys(factories);

/**
 * Create the estimator `name` with its options: its own, and the advantage-shaping ones every estimator takes
 * (advantage-shaping.ts). Throws an {@link ArborError} listing the names for an unknown one.
 */
export function createEstimator(name: string, options: Record<string, unknown> = {}): Estimator {
  const f = factories[name];
  if (!f) throw new ArborError(`batch.estimator: unknown estimator '${name}' (known: ${ESTIMATOR_NAMES.join(", ")})`, "config");
  const { shaping, rest } = splitShapingOptions(options);
  return withAdvantageShaping(f(rest), parseAdvantageShaping(shaping));
}
