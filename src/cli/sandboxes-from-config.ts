// The sandbox provider a run config describes (bwrap, docker or k8s, with its limits), built the same way by
// `arbor run` for its own programs and by `arbor serve worker` for the programs it takes. A black-box
// agent's install (`agent.install`) is resolved here, npm packages installed once into their cache,
// and given to every sandbox as a read-only mount at /opt/agent.
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_MOUNT, resolveAgentInstall, type AgentInstall } from "../agents/blackbox/agent-install.js";
import type { Clock } from "../core/clock.js";
import type { RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { bwrapAvailable } from "../sandbox/bwrap.js";
import { createSandboxProvider } from "../sandbox/registry.js";
import type { ReadOnlyMount, SandboxProvider } from "../sandbox/sandbox.js";

/** The agent's install (`agent.install`), installed from npm into its cache when needed; undefined without one. */
export async function agentInstallOf(cfg: RunConfig, log?: (line: string) => void): Promise<AgentInstall | undefined> {
  const spec = cfg.agent.install;
  if (spec === undefined) return undefined;
  const cacheDir = cfg.agent.installCache ?? join(tmpdir(), "arbor-agent-installs");
  if (spec.startsWith("npm:")) log?.(`agent    ${spec}: npm install into ${cacheDir} unless cached`);
  const install = await resolveAgentInstall(spec, { cacheDir, timeoutMs: cfg.agent.installTimeoutMs });
  log?.(`agent    ${spec} ${install.installed ? "installed" : "found"} at ${install.hostPath}, read-only at ${AGENT_MOUNT} in every sandbox`);
  return install;
}

/**
 * The provider of `cfg.sandbox`, its workspaces under `root` (default `cfg.sandbox.root`), every sandbox
 * seeing the agent's install (if any) read-only. Throws, naming the missing package, when bwrap is asked
 * for and cannot build a sandbox here, and naming `agent.install` when the install cannot be had.
 */
export async function sandboxesFromConfig(cfg: RunConfig, clock: Clock, root = cfg.sandbox.root, log?: (line: string) => void): Promise<SandboxProvider> {
  if (cfg.sandbox.provider === "bwrap") {
    const bw = bwrapAvailable();
    if (!bw.ok) throw new ArborError(bw.message, "sandbox");
  }
  const install = await agentInstallOf(cfg, log);
  const readOnlyMounts: ReadOnlyMount[] = install ? [{ hostPath: install.hostPath, sandboxPath: AGENT_MOUNT }] : [];
  const shared = { maxProcesses: cfg.sandbox.maxProcesses, workspaceMb: cfg.sandbox.workspaceMb };
  return createSandboxProvider(cfg.sandbox.provider, {
    root,
    limits: { cpuSeconds: cfg.sandbox.cpuSeconds, memoryMb: cfg.sandbox.memoryMb, wallMs: cfg.sandbox.wallMs },
    clock,
    readOnlyMounts,
    bwrap: shared,
    docker: { ...shared, image: cfg.sandbox.docker.image, cpus: cfg.sandbox.docker.cpus },
    k8s: { workspaceMb: cfg.sandbox.workspaceMb, namespace: cfg.sandbox.k8s.namespace, image: cfg.sandbox.k8s.image, cpus: cfg.sandbox.k8s.cpus },
  });
}
