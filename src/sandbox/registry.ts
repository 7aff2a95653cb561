// Sandbox provider registry: the one place that maps a configured provider name to its factory.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { createBwrapProvider } from "./bwrap.js";
import type { SandboxLimits, SandboxProvider } from "./sandbox.js";

export interface SandboxProviderOptions {
  /** Directory under which per-program workspaces are created. */
  root?: string;
  limits: SandboxLimits;
  clock?: Clock;
}

const FACTORIES: Record<string, (opts: SandboxProviderOptions) => SandboxProvider> = {
  bwrap: (opts) => createBwrapProvider(opts),
};

/** Names accepted by {@link createSandboxProvider}. */
export const sandboxProviderNames: readonly string[] = Object.keys(FACTORIES);

/** Create the sandbox provider registered under `name` (e.g. "bwrap"). */
export function createSandboxProvider(name: string, opts: SandboxProviderOptions): SandboxProvider {
  const factory = Object.hasOwn(FACTORIES, name) ? FACTORIES[name] : undefined;
  if (!factory) {
    throw new ArborError(
      `unknown sandbox provider '${name}' (known: ${sandboxProviderNames.join(", ")})`,
      "config",
    );
  }
  return factory(opts);
}
