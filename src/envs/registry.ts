// Environment registry: the one place that maps a configured environment name to its factory.
import { ArborError } from "../core/errors.js";
import { createCalcEnvironment } from "./calc/calc.js";
import type { Environment, HygieneConfig } from "./env.js";
import { createSearchQaEnvironment } from "./search-qa/search-qa.js";
import { createSweMiniEnvironment } from "./swe-mini/swe-mini.js";

/** Options every environment factory accepts (each uses what applies to it). */
export interface EnvironmentOptions {
  hygiene?: HygieneConfig;
  /** swe-mini: a folder of task folders instead of the shipped ones (e.g. the one `arbor validate` filtered). */
  tasksDir?: string;
}

const FACTORIES: Record<string, (opts: EnvironmentOptions) => Environment> = {
  calc: () => createCalcEnvironment(),
  "swe-mini": (opts) => createSweMiniEnvironment({ ...(opts.hygiene ? { hygiene: opts.hygiene } : {}), ...(opts.tasksDir ? { tasksDir: opts.tasksDir } : {}) }),
  "search-qa": () => createSearchQaEnvironment(),
};

/** Names accepted by {@link createEnvironment}. */
export const environmentNames: readonly string[] = Object.keys(FACTORIES);

/** Create the environment registered under `name` (e.g. "calc"). */
export function createEnvironment(name: string, opts: EnvironmentOptions = {}): Environment {
  const factory = Object.hasOwn(FACTORIES, name) ? FACTORIES[name] : undefined;
  if (!factory) throw new ArborError(`unknown environment '${name}' (known: ${environmentNames.join(", ")})`, "config");
  return factory(opts);
}
