// Environment registry: the one place that maps a configured environment name to its factory.
import { ArborError } from "../core/errors.js";
import { createCalcEnvironment } from "./calc/calc.js";
import type { Environment } from "./env.js";

const FACTORIES: Record<string, () => Environment> = {
  calc: createCalcEnvironment,
};

/** Names accepted by {@link createEnvironment}. */
export const environmentNames: readonly string[] = Object.keys(FACTORIES);

/** Create the environment registered under `name` (e.g. "calc"). */
export function createEnvironment(name: string): Environment {
  const factory = Object.hasOwn(FACTORIES, name) ? FACTORIES[name] : undefined;
  if (!factory) throw new ArborError(`unknown environment '${name}' (known: ${environmentNames.join(", ")})`, "config");
  return factory();
}
