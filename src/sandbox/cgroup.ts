// Per-sandbox control groups (memory + pids): a sandbox-wide memory cap and process cap whose
// kernel event counters tell *which* limit stopped a command (OOM kill, fork refused), which
// per-process rlimits alone cannot. Works with cgroup v1 (memory, pids hierarchies) and v2
// (unified, with both controllers delegated); where neither is writable, sandboxes fall back to
// rlimits only and `cgroupSupport()` says why.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Counters read from the kernel; they only grow, so a delta across an exec attributes events to it. */
export interface CgroupCounters {
  /** Processes killed by the OOM killer inside the group. */
  oomKills: number;
  /** Forks refused because the group was at its process cap. */
  pidsRefused: number;
}

export interface SandboxCgroup {
  /** `cgroup.procs` files a process writes its pid to (before dropping privileges) to join. */
  readonly procsFiles: readonly string[];
  counters(): CgroupCounters;
  /** Remove the group's directories (its processes must be gone). Returns false if still busy. */
  remove(): boolean;
}

interface Layout {
  mode: "v1" | "v2";
  /** Parent directories new groups are created under (one per hierarchy). */
  memoryParent: string;
  pidsParent: string;
}

const CGROUP_ROOT = "/sys/fs/cgroup";
let probed: { layout?: Layout; message: string } | undefined;

function ownPath(controller: string): string | undefined {
  const lines = readFileSync("/proc/self/cgroup", "utf8").trim().split("\n");
  for (const l of lines) {
    const [, ctrls, path] = l.split(":", 3) as [string, string, string];
    if (controller === "" ? ctrls === "" && l.startsWith("0::") : ctrls.split(",").includes(controller)) return path;
  }
  return undefined;
}

function tryMkdirProbe(parent: string, file: string): boolean {
  const probe = join(parent, `arbor-probe-${process.pid}`);
  try {
    mkdirSync(probe);
  } catch {
    return false;
  }
  const ok = existsSync(join(probe, file));
  try {
    rmdirSync(probe);
  } catch {
    // left for the kernel: an empty group costs nothing
  }
  return ok;
}

function probe(): { layout?: Layout; message: string } {
  try {
    const memV1 = ownPath("memory");
    const pidsV1 = ownPath("pids");
    if (memV1 !== undefined && pidsV1 !== undefined) {
      const memoryParent = join(CGROUP_ROOT, "memory", memV1);
      const pidsParent = join(CGROUP_ROOT, "pids", pidsV1);
      if (tryMkdirProbe(memoryParent, "memory.limit_in_bytes") && tryMkdirProbe(pidsParent, "pids.max")) {
        return { layout: { mode: "v1", memoryParent, pidsParent }, message: "cgroup v1 memory+pids" };
      }
      return { message: `cgroup v1 hierarchies ${memoryParent}, ${pidsParent} are not writable` };
    }
    const unified = ownPath("");
    if (unified !== undefined) {
      const parent = join(CGROUP_ROOT, unified);
      if (tryMkdirProbe(parent, "memory.max") && tryMkdirProbe(parent, "pids.max")) {
        return { layout: { mode: "v2", memoryParent: parent, pidsParent: parent }, message: "cgroup v2 memory+pids" };
      }
      return { message: `cgroup v2 group ${parent} does not delegate memory and pids to sub-groups` };
    }
    return { message: "no memory/pids cgroup found in /proc/self/cgroup" };
  } catch (e) {
    return { message: `cgroups unavailable: ${(e as Error).message}` };
  }
}

/** Whether per-sandbox cgroups can be created here (probed once per process). */
export function cgroupSupport(): { ok: boolean; mode?: "v1" | "v2"; message: string } {
  probed ??= probe();
  return { ok: probed.layout !== undefined, mode: probed.layout?.mode, message: probed.message };
}

function readKey(file: string, key: string): number {
  try {
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const [k, v] = line.trim().split(/\s+/);
      if (k === key) return Number(v) || 0;
    }
  } catch {
    // group already removed: nothing more can happen in it
  }
  return 0;
}

function rmdirQuiet(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/**
 * Create a group named `name` capping the sandbox's total memory (bytes; anonymous memory plus
 * the tmpfs pages it writes) and its process count. Undefined where cgroups are unavailable.
 */
export function createSandboxCgroup(name: string, memoryBytes: number, maxProcesses: number): SandboxCgroup | undefined {
  const support = cgroupSupport();
  const layout = probed?.layout;
  if (!support.ok || !layout) return undefined;
  const mem = join(layout.memoryParent, name);
  const pids = layout.mode === "v1" ? join(layout.pidsParent, name) : mem;
  const dirs = layout.mode === "v1" ? [mem, pids] : [mem];
  for (const d of dirs) mkdirSync(d);
  if (layout.mode === "v1") {
    writeFileSync(join(mem, "memory.limit_in_bytes"), String(memoryBytes));
    // No swap escape hatch: where swap accounting exists, cap memory+swap at the same value.
    if (existsSync(join(mem, "memory.memsw.limit_in_bytes"))) writeFileSync(join(mem, "memory.memsw.limit_in_bytes"), String(memoryBytes));
  } else {
    writeFileSync(join(mem, "memory.max"), String(memoryBytes));
    if (existsSync(join(mem, "memory.swap.max"))) writeFileSync(join(mem, "memory.swap.max"), "0");
  }
  writeFileSync(join(pids, "pids.max"), String(maxProcesses));
  const oomFile = layout.mode === "v1" ? join(mem, "memory.oom_control") : join(mem, "memory.events");
  return {
    procsFiles: dirs.map((d) => join(d, "cgroup.procs")),
    counters: () => ({ oomKills: readKey(oomFile, "oom_kill"), pidsRefused: readKey(join(pids, "pids.events"), "max") }),
    remove: () => dirs.map(rmdirQuiet).every(Boolean),
  };
}

/**
 * Remove the sandbox groups left by processes that were killed outright (their names start with
 * the owner's pid, like workspaces); `isStale(name)` decides. Returns the names removed.
 */
export function sweepStaleCgroups(isStale: (name: string) => boolean): string[] {
  cgroupSupport();
  const layout = probed?.layout;
  if (!layout) return [];
  const removed = new Set<string>();
  for (const parent of new Set([layout.memoryParent, layout.pidsParent])) {
    let names: string[];
    try {
      names = readdirSync(parent, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch {
      continue;
    }
    for (const name of names) if (isStale(name) && rmdirQuiet(join(parent, name))) removed.add(name);
  }
  return [...removed];
}

/** The directories a sandbox group named `name` has (or would have) here; empty without cgroups. */
export function sandboxCgroupDirs(name: string): string[] {
  cgroupSupport();
  const layout = probed?.layout;
  if (!layout) return [];
  return layout.mode === "v1" ? [join(layout.memoryParent, name), join(layout.pidsParent, name)] : [join(layout.memoryParent, name)];
}
