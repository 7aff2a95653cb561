// The sandbox provider a run config describes (bwrap, docker or k8s, with its limits), built the same way by
// `arbor run` for its own programs and by `arbor serve worker` for the programs it takes.
import type { Clock } from "../core/clock.js";
import type { RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { bwrapAvailable } from "../sandbox/bwrap.js";
import { createSandboxProvider } from "../sandbox/registry.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";

/**
 * The provider of `cfg.sandbox`, its workspaces under `root` (default `cfg.sandbox.root`). Throws, naming the
 * missing package, when bwrap is asked for and cannot build a sandbox here.
 */
export function sandboxesFromConfig(cfg: RunConfig, clock: Clock, root = cfg.sandbox.root): SandboxProvider {
  if (cfg.sandbox.provider === "bwrap") {
    const bw = bwrapAvailable();
    if (!bw.ok) throw new ArborError(bw.message, "sandbox");
  }
  const shared = { maxProcesses: cfg.sandbox.maxProcesses, workspaceMb: cfg.sandbox.workspaceMb };
  return createSandboxProvider(cfg.sandbox.provider, {
    root,
    limits: { cpuSeconds: cfg.sandbox.cpuSeconds, memoryMb: cfg.sandbox.memoryMb, wallMs: cfg.sandbox.wallMs },
    clock,
    bwrap: shared,
    docker: { ...shared, image: cfg.sandbox.docker.image, cpus: cfg.sandbox.docker.cpus },
    k8s: { workspaceMb: cfg.sandbox.workspaceMb, namespace: cfg.sandbox.k8s.namespace, image: cfg.sandbox.k8s.image, cpus: cfg.sandbox.k8s.cpus },
  });
}
