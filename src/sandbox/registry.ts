// Sandbox provider registry: the one place that maps a configured provider name to its factory.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { createBwrapProvider, type BwrapProviderOptions } from "./bwrap.js";
import { createDockerProvider, type DockerProviderOptions } from "./docker.js";
import { createK8sProvider, type K8sProviderOptions } from "./k8s.js";
import type { ReadOnlyMount, SandboxLimits, SandboxProvider } from "./sandbox.js";

type Extra<T> = Partial<Omit<T, "limits" | "clock" | "root" | "readOnlyMounts">>;

export interface SandboxProviderOptions {
  /** Directory under which per-program workspaces are created (bwrap, docker). */
  root?: string;
  limits: SandboxLimits;
  clock?: Clock;
  /** Host folders every sandbox sees read-only (an agent's install), whatever the provider. */
  readOnlyMounts?: readonly ReadOnlyMount[];
  /** Provider-specific options, used only by that provider. */
  bwrap?: Extra<BwrapProviderOptions>;
  docker?: Extra<DockerProviderOptions>;
  k8s?: Extra<K8sProviderOptions>;
}

const FACTORIES: Record<string, (opts: SandboxProviderOptions) => SandboxProvider> = {
  bwrap: (o) => createBwrapProvider({ ...o.bwrap, root: o.root, limits: o.limits, clock: o.clock, readOnlyMounts: o.readOnlyMounts ?? [] }),
  docker: (o) => createDockerProvider({ ...o.docker, root: o.root, limits: o.limits, clock: o.clock, readOnlyMounts: o.readOnlyMounts ?? [] }),
  k8s: (o) => createK8sProvider({ ...o.k8s, limits: o.limits, clock: o.clock, readOnlyMounts: o.readOnlyMounts ?? [] }),
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
