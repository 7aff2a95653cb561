// Pure request builders for the docker provider: the container spec (no network, read-only
// rootfs, workspace bind, CPU/memory/pids limits) and the exec specs (command wrapper that records
// the exec's pid, the kill of its process tree at the wall-clock limit).
import type { ContainerCreateOptions, ExecCreateOptions } from "dockerode";
import { SANDBOX_WORKSPACE } from "./bwrap-args.js";
import type { ReadOnlyMount } from "./sandbox.js";

export interface DockerSandboxSpec {
  image: string;
  programId: string;
  hostWorkspace: string;
  /** Container user "uid:gid". */
  user: string;
  /** Whole-container memory cap, MiB (no swap on top). */
  memoryMb: number;
  /** CPU share, in CPUs (NanoCpus). */
  cpus: number;
  cpuSeconds: number;
  maxProcesses: number;
  maxFileMb: number;
  tmpSizeMb: number;
  /** Labels that mark the container as Arbor's (owner pid), for sweeping after a crash. */
  ownerPid: number;
  /** Host folders mounted read-only in the container (an agent's install). */
  readOnlyMounts?: readonly ReadOnlyMount[];
}

export const BASE_ENV: Record<string, string> = {
  PATH: "/usr/local/bin:/usr/bin:/bin",
  HOME: SANDBOX_WORKSPACE,
  TMPDIR: "/tmp",
  LANG: "C.UTF-8",
};

const MiB = 1024 * 1024;

/** The create-container request for one program's sandbox. */
export function containerSpec(s: DockerSandboxSpec): ContainerCreateOptions {
  return {
    Image: s.image,
    // A do-nothing pid 1 keeps the container up between execs; tini (Init) reaps orphans.
    Entrypoint: ["sleep"],
    Cmd: ["infinity"],
    User: s.user,
    WorkingDir: SANDBOX_WORKSPACE,
    Hostname: "arbor-sandbox",
    Env: Object.entries(BASE_ENV).map(([k, v]) => `${k}=${v}`),
    NetworkDisabled: true,
    Labels: { "arbor.sandbox": "1", "arbor.program": s.programId, "arbor.owner": String(s.ownerPid) },
    HostConfig: {
      NetworkMode: "none",
      ReadonlyRootfs: true,
      Binds: [`${s.hostWorkspace}:${SANDBOX_WORKSPACE}:rw`, ...(s.readOnlyMounts ?? []).map((m) => `${m.hostPath}:${m.sandboxPath}:ro`)],
      Tmpfs: { "/tmp": `rw,nosuid,nodev,size=${s.tmpSizeMb}m` },
      Memory: Math.floor(s.memoryMb * MiB),
      MemorySwap: Math.floor(s.memoryMb * MiB),
      NanoCpus: Math.floor(s.cpus * 1e9),
      PidsLimit: s.maxProcesses,
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges"],
      Ulimits: [
        { Name: "cpu", Soft: s.cpuSeconds, Hard: s.cpuSeconds + 1 },
        { Name: "fsize", Soft: Math.floor(s.maxFileMb * MiB), Hard: Math.floor(s.maxFileMb * MiB) },
      ],
      Init: true,
      AutoRemove: false,
    },
  };
}

/** Wrapper: write the shell's pid (the command's, after exec) where the wall-clock kill finds it. */
export const RECORD_PID = 'echo $$ > "/tmp/.arbor-exec-$0.pid" && exec "$@"';

/** The exec request running `argv` as exec number `execId`. */
export function execSpec(
  execId: number,
  argv: readonly string[],
  cwd: string,
  env: Record<string, string> | undefined,
): ExecCreateOptions {
  return {
    Cmd: ["/bin/sh", "-c", RECORD_PID, String(execId), ...argv],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    WorkingDir: cwd,
    Env: Object.entries({ ...BASE_ENV, ...(env ?? {}) }).map(([k, v]) => `${k}=${v}`),
  };
}

/** Kill the process tree of exec `execId` (children first, via /proc/<pid>/task/*\/children). */
export const KILL_TREE =
  'kt() { for c in $(cat /proc/$1/task/*/children 2>/dev/null); do kt $c; done; kill -KILL $1 2>/dev/null; }; p=$(cat "/tmp/.arbor-exec-$0.pid" 2>/dev/null) && kt "$p"; rm -f "/tmp/.arbor-exec-$0.pid"';

/** The exec request that kills exec `execId`'s processes. */
export function killSpec(execId: number): ExecCreateOptions {
  return { Cmd: ["/bin/sh", "-c", KILL_TREE, String(execId)], AttachStdout: true, AttachStderr: true, Tty: false };
}

/** The exec request that reads the container's cgroup event counters (v2, then v1 files). */
export function countersSpec(): ExecCreateOptions {
  return {
    Cmd: [
      "/bin/sh",
      "-c",
      "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null; echo '-- pids'; cat /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events 2>/dev/null; true",
    ],
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
  };
}

/** OOM kills and refused forks from the text `countersSpec` prints. */
export function parseCounters(text: string): { oomKills: number; pidsRefused: number } {
  let oomKills = 0;
  let pidsRefused = 0;
  // memory.events has a "max" line too (times memory.max was reached): only the pids section counts forks.
  let inPids = false;
  for (const line of text.split("\n")) {
    const [k, v] = line.trim().split(/\s+/);
    if (k === "--" && v === "pids") inPids = true;
    else if (!inPids && k === "oom_kill") oomKills = Math.max(oomKills, Number(v) || 0);
    else if (inPids && k === "max") pidsRefused = Math.max(pidsRefused, Number(v) || 0);
  }
  return { oomKills, pidsRefused };
}
