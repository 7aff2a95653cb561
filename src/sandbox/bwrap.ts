// The bubblewrap sandbox provider (local default): one fresh workspace per program, every exec in
// new namespaces (no network, own pids), read-only system, per-process rlimits, wall-clock kill.
import { spawnSync } from "node:child_process";
import { constants as fsConstants, accessSync, chownSync, mkdirSync, rmSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import type { Clock } from "../core/clock.js";
import { CapacityError, ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { buildBwrapArgv, buildBwrapCommand, DEFAULT_BINARIES, type SandboxBinaries } from "./bwrap-args.js";
import { argumentsLimitResult, execSizeProblem } from "./exec-size.js";
import { memoryEscapeFilter } from "./seccomp.js";
import { ownedByDeadProcess, ownerPrefix, sweepStaleWorkspaces } from "./stale-workspaces.js";
import { registerExitCleanup, unregisterExitCleanup, type SyncDisposable } from "./exit-cleanup.js";
import { killPidNamespace } from "./proc-scan.js";
import { checkReadOnlyMounts } from "./read-only-mounts.js";
import type { ExecOptions, ExecResult, ReadOnlyMount, Sandbox, SandboxLimits, SandboxProvider } from "./sandbox.js";
import { SandboxProcess } from "./sandbox-process.js";
import { createSandboxCgroup, sweepStaleCgroups, type SandboxCgroup } from "./cgroup.js";
import { classifyLimit } from "./limit-flags.js";
import { freeBytes, mountWorkspaceTmpfs, unmountWorkspace, unmountWorkspaceSync } from "./workspace-mount.js";
import { writeWorkspaceFile } from "./workspace-files.js";

/** Uid the sandbox runs as when Arbor itself runs as root ("nobody"). */
export const DEFAULT_SANDBOX_UID = 65534;
const INFO_FD = 3;
/** bwrap reads its options from this fd (`--args`), so that they are not in its argv. */
const ARGS_FD = INFO_FD + 1;
/** bwrap reads the seccomp filter from this fd (`--seccomp`). */
const SECCOMP_FD = INFO_FD + 2;
/** Refuses memfd_create and System V shared memory (see seccomp.ts); undefined on other architectures. */
const SECCOMP_FILTER = memoryEscapeFilter();
/** How long destroy() waits for the kernel to finish tearing a pid namespace down. */
const TEARDOWN_WAIT_MS = 5000;
const TEARDOWN_POLL_MS = 10;

export interface BwrapProviderOptions {
  /** Directory under which workspaces are created (default `<tmpdir>/arbor-sandboxes`). */
  root?: string;
  limits: SandboxLimits;
  clock?: Clock;
  /** Max processes per exec, bwrap's init included (RLIMIT_NPROC; default 64). */
  maxProcesses?: number;
  /** Largest file a sandboxed process may write, MiB (RLIMIT_FSIZE; default 512). */
  maxFileMb?: number;
  /** Size of the private /tmp, MiB (default 64). */
  tmpSizeMb?: number;
  /** Size of the private /dev/shm, MiB (default 64). The root, /etc and /dev are read-only. */
  shmSizeMb?: number;
  /**
   * Size of each workspace, MiB (default 256): the workspace is a tmpfs of that size mounted on
   * the host directory, so filling it ends in ENOSPC. Needs mount rights; without them (or with
   * `limitWorkspace: false`) it is a plain directory and only maxFileMb bounds a single file.
   */
  workspaceMb?: number;
  limitWorkspace?: boolean;
  /**
   * Memory of the whole sandbox, MiB: every process plus the files it wrote to its tmpfs mounts
   * (default memoryMb + workspaceMb + tmpSizeMb + shmSizeMb). Enforced by a per-sandbox cgroup with an OOM
   * counter, together with a process cap of maxProcesses, where cgroups are writable.
   */
  sandboxMemoryMb?: number;
  /** Use per-sandbox cgroups when available (default true). */
  useCgroups?: boolean;
  /** Bytes of stdout and of stderr kept per exec (default 1 MiB); the rest is dropped with a marker. */
  maxOutputBytes?: number;
  /** Live sandboxes allowed at once (default 1024). */
  maxSandboxes?: number;
  /**
   * Host uid (and gid) the sandbox runs as when Arbor runs as root (default 65534). Running as
   * root would make RLIMIT_NPROC void, since the kernel never applies it to the host's root.
   */
  uid?: number;
  binaries?: Partial<SandboxBinaries>;
  /** Host folders every sandbox sees read-only (`--ro-bind`), e.g. an agent's install at /opt/agent. */
  readOnlyMounts?: readonly ReadOnlyMount[];
}

const probeCache = new Map<string, { ok: boolean; message: string }>();

/**
 * Whether bubblewrap (and setpriv, prlimit) are installed and can actually build a sandbox here
 * (user namespaces may be disabled). Probed once per process.
 */
export function bwrapAvailable(binaries: SandboxBinaries = DEFAULT_BINARIES): { ok: boolean; message: string } {
  const key = JSON.stringify(binaries);
  let res = probeCache.get(key);
  if (!res) {
    res = probeBwrap(binaries);
    probeCache.set(key, res);
  }
  return res;
}

function probeBwrap(binaries: SandboxBinaries): { ok: boolean; message: string } {
  const missing: Record<keyof SandboxBinaries, string> = {
    bwrap: "bubblewrap (bwrap) is not installed: apt-get install bubblewrap",
    setpriv: "setpriv is not installed: apt-get install util-linux",
    prlimit: "prlimit is not installed: apt-get install util-linux",
  };
  for (const key of Object.keys(missing) as (keyof SandboxBinaries)[]) {
    try {
      accessSync(binaries[key], fsConstants.X_OK);
    } catch {
      return { ok: false, message: `${missing[key]} (looked for ${binaries[key]})` };
    }
  }
  const probeDir = tmpdir();
  const argv = buildBwrapArgv({
    binaries,
    hostWorkspace: probeDir,
    argv: ["/usr/bin/true"],
    uid: sandboxUid(DEFAULT_SANDBOX_UID),
    cpuSeconds: 5,
    memoryMb: 256,
    maxProcesses: 8,
    maxFileMb: 1,
    tmpSizeMb: 1,
    shmSizeMb: 1,
    infoFd: INFO_FD,
  });
  const r = spawnSync(argv[0] as string, argv.slice(1), {
    stdio: ["ignore", "ignore", "pipe", "pipe"],
    timeout: 10_000,
    cwd: "/",
    env: { PATH: "/usr/bin:/bin" },
  });
  // A bwrap that fails mid-setup can leave its pid 1 behind: kill whatever the probe left.
  const ns = /"pid-namespace"\s*:\s*(\d+)/.exec(r.output?.[INFO_FD]?.toString("utf8") ?? "");
  if (ns) killPidNamespace(Number(ns[1]));
  if (r.status !== 0) {
    const why = (r.stderr?.toString("utf8").trim() || r.error?.message || `exit ${r.status}`).split("\n")[0];
    return {
      ok: false,
      message: `bubblewrap is installed but cannot create a sandbox here (${why}); user namespaces may be disabled`,
    };
  }
  return { ok: true, message: "bubblewrap sandboxes work" };
}

function sandboxUid(configured: number): number | null {
  return process.getuid?.() === 0 ? configured : null;
}

function positive(field: string, v: number, integer: boolean): void {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || (integer && !Number.isInteger(v))) {
    throw new ArborError(`sandbox: ${field} must be a positive ${integer ? "integer" : "number"}, got ${v}`, "config");
  }
}

/** Every ancestor of `dir` must be searchable by `uid`, or bwrap (running as `uid`) cannot bind it. */
function checkTraversable(dir: string, uid: number | null): void {
  if (uid === null) return;
  for (let d = dir; ; d = dirname(d)) {
    const st = statSync(d);
    const ok = st.uid === uid ? (st.mode & 0o100) !== 0 : (st.mode & 0o001) !== 0;
    if (!ok) {
      throw new ArborError(
        `sandbox: root ${dir} is not reachable by the sandbox uid ${uid}: ${d} is not searchable (chmod o+x ${d} or choose another root)`,
        "config",
      );
    }
    if (dirname(d) === d) return;
  }
}

interface ProviderContext {
  limits: SandboxLimits;
  clock: Clock;
  binaries: SandboxBinaries;
  uid: number | null;
  maxProcesses: number;
  maxFileMb: number;
  tmpSizeMb: number;
  shmSizeMb: number;
  maxOutputBytes: number;
  workspaceMb: number;
  limitWorkspace: boolean;
  sandboxMemoryMb: number;
  useCgroups: boolean;
  readOnlyMounts: ReadOnlyMount[];
}

/** Below this many free bytes a size-limited workspace counts as full. */
const FULL_BELOW_BYTES = 64 * 1024;

/** One program's bwrap sandbox. */
class BwrapSandbox implements Sandbox, SyncDisposable {
  private readonly running = new Set<SandboxProcess>();
  private destroyed = false;
  private destroying: Promise<void> | undefined;

  constructor(
    readonly programId: string,
    readonly hostWorkspace: string,
    private readonly ctx: ProviderContext,
    private readonly onGone: (s: BwrapSandbox) => void,
    /** The sandbox's cgroup (memory + process caps with event counters), if cgroups are usable. */
    readonly cgroup: SandboxCgroup | undefined,
    /** Whether the workspace is a size-limited tmpfs mount. */
    readonly workspaceLimited: boolean,
  ) {}

  async exec(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    const wallMs = opts.wallMs ?? this.ctx.limits.wallMs;
    positive("wallMs", wallMs, false);
    const tooBig = execSizeProblem(argv, opts.env);
    if (tooBig !== undefined) return argumentsLimitResult(tooBig);
    let cmd: { argv: string[]; argsData: Buffer };
    try {
      cmd = buildBwrapCommand({
        binaries: this.ctx.binaries,
        hostWorkspace: this.hostWorkspace,
        argv,
        cwd: opts.cwd,
        env: opts.env,
        uid: this.ctx.uid,
        cpuSeconds: this.ctx.limits.cpuSeconds,
        memoryMb: this.ctx.limits.memoryMb,
        // With a cgroup the group's pids.max is the cap (its refusals are counted); the rlimit,
        // checked first by the kernel, is then a backstop just above it.
        maxProcesses: this.cgroup ? this.ctx.maxProcesses + 2 : this.ctx.maxProcesses,
        maxFileMb: this.ctx.maxFileMb,
        tmpSizeMb: this.ctx.tmpSizeMb,
        shmSizeMb: this.ctx.shmSizeMb,
        infoFd: INFO_FD,
        seccompFd: SECCOMP_FILTER ? SECCOMP_FD : undefined,
        cgroupProcs: this.cgroup?.procsFiles,
        readOnlyMounts: this.ctx.readOnlyMounts,
      }, ARGS_FD);
    } catch (e) {
      throw new ArborError(`sandbox ${this.programId}: ${(e as Error).message}`, "sandbox");
    }
    const before = this.cgroup?.counters();
    const freeBefore = this.workspaceLimited ? await freeBytes(this.hostWorkspace) : undefined;
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    let proc: SandboxProcess;
    try {
      proc = new SandboxProcess(cmd.argv, {
        stdin: opts.stdin,
        wallMs,
        maxOutputBytes: this.ctx.maxOutputBytes,
        clock: this.ctx.clock,
        infoFd: INFO_FD,
        inputs: SECCOMP_FILTER ? [cmd.argsData, SECCOMP_FILTER] : [cmd.argsData],
      });
    } catch (e) {
      // Under a small stack limit the kernel's ARG_MAX can be below execSizeProblem's bound.
      if ((e as NodeJS.ErrnoException).code === "E2BIG") return argumentsLimitResult(`exec: argv and environment are too big to start (${(e as Error).message})`);
      throw e;
    }
    this.running.add(proc);
    try {
      const r = await proc.result;
      const after = this.cgroup?.counters();
      const free = freeBefore !== undefined ? await freeBytes(this.hostWorkspace) : undefined;
      const limit = classifyLimit({
        ...r,
        oomKills: (after?.oomKills ?? 0) - (before?.oomKills ?? 0),
        pidsRefused: (after?.pidsRefused ?? 0) - (before?.pidsRefused ?? 0),
        // Only a workspace this command filled counts: a full one left by an earlier command
        // would otherwise blame every later failure on the disk.
        diskFull: free !== undefined && free < FULL_BELOW_BYTES && (freeBefore ?? 0) >= FULL_BELOW_BYTES,
      });
      return limit ? { ...r, limit } : r;
    } finally {
      // Normally bwrap reaps its pid 1, which empties the namespace; if bwrap died first (killed,
      // or failed during setup), kill what is left and keep it listed for destroy() to wait on.
      if (proc.killLeftovers() === 0) this.running.delete(proc);
    }
  }

  async writeFile(relPath: string, data: string | Uint8Array): Promise<void> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    await writeWorkspaceFile(this.hostWorkspace, relPath, data, this.ctx.uid, this.programId);
  }

  destroy(): Promise<void> {
    this.destroying ??= this.teardown();
    return this.destroying;
  }

  private async teardown(): Promise<void> {
    this.destroyed = true;
    const procs = [...this.running];
    for (const p of procs) p.kill();
    await Promise.all(procs.map((p) => p.result.catch(() => undefined)));
    try {
      await this.waitNamespacesGone(procs);
    } finally {
      this.running.clear();
      try {
        await this.removeCgroup();
      } finally {
        if (this.workspaceLimited) await unmountWorkspace(this.hostWorkspace);
        await rm(this.hostWorkspace, { recursive: true, force: true, maxRetries: 3 });
        this.onGone(this);
      }
    }
  }

  /** The kernel frees a cgroup only once its last process is reaped: retry briefly. */
  private async removeCgroup(): Promise<void> {
    if (!this.cgroup) return;
    const start = this.ctx.clock.now();
    while (!this.cgroup.remove()) {
      if (this.ctx.clock.now() - start > TEARDOWN_WAIT_MS) {
        throw new ArborError(`sandbox ${this.programId}: its cgroup still has processes after teardown`, "sandbox");
      }
      await this.ctx.clock.sleep(TEARDOWN_POLL_MS);
    }
  }

  /** bwrap has exited; wait until the kernel has also reaped every process in its pid namespaces. */
  private async waitNamespacesGone(procs: SandboxProcess[]): Promise<void> {
    const start = this.ctx.clock.now();
    for (const p of procs) {
      const ns = p.pidNamespace;
      if (ns === undefined) continue;
      // Waits until the kernel has reaped every process of the namespace, so it scans by the inode (pid 1 may be
      // gone while the rest still exit); exec's own clean-up only kills while pid 1 lives (killLeftovers).
      while (killPidNamespace(ns) > 0) {
        if (this.ctx.clock.now() - start > TEARDOWN_WAIT_MS) {
          throw new ArborError(`sandbox ${this.programId}: processes survived teardown of pid namespace ${ns}`, "sandbox");
        }
        await this.ctx.clock.sleep(TEARDOWN_POLL_MS);
      }
    }
  }

  disposeSync(): void {
    this.destroyed = true;
    for (const p of this.running) p.kill();
    if (this.workspaceLimited) unmountWorkspaceSync(this.hostWorkspace);
    rmSync(this.hostWorkspace, { recursive: true, force: true, maxRetries: 3 });
    this.cgroup?.remove();
  }
}

/** The bwrap implementation of {@link SandboxProvider}. */
export class BwrapProvider implements SandboxProvider {
  readonly name = "bwrap";
  readonly root: string;
  private readonly ctx: ProviderContext;
  private readonly live = new Set<BwrapSandbox>();
  private readonly maxSandboxes: number;
  /** Workspaces of dead owners (killed runs) removed when this provider started. */
  readonly sweptOnStart: string[];
  /** Why workspaces are not size-limited, once a mount has failed (undefined while they are). */
  workspaceLimitNote: string | undefined;

  constructor(opts: BwrapProviderOptions) {
    const l = opts.limits;
    if (!l || typeof l !== "object") throw new ArborError("sandbox: limits are required", "config");
    positive("limits.cpuSeconds", l.cpuSeconds, true);
    positive("limits.memoryMb", l.memoryMb, false);
    positive("limits.wallMs", l.wallMs, false);
    const maxProcesses = opts.maxProcesses ?? 64;
    const maxFileMb = opts.maxFileMb ?? 512;
    const tmpSizeMb = opts.tmpSizeMb ?? 64;
    const shmSizeMb = opts.shmSizeMb ?? 64;
    const workspaceMb = opts.workspaceMb ?? 256;
    const sandboxMemoryMb = opts.sandboxMemoryMb ?? l.memoryMb + workspaceMb + tmpSizeMb + shmSizeMb;
    const maxOutputBytes = opts.maxOutputBytes ?? 1024 * 1024;
    this.maxSandboxes = opts.maxSandboxes ?? 1024;
    positive("maxProcesses", maxProcesses, true);
    positive("maxFileMb", maxFileMb, false);
    positive("tmpSizeMb", tmpSizeMb, false);
    positive("shmSizeMb", shmSizeMb, false);
    positive("workspaceMb", workspaceMb, false);
    positive("sandboxMemoryMb", sandboxMemoryMb, false);
    positive("maxOutputBytes", maxOutputBytes, true);
    positive("maxSandboxes", this.maxSandboxes, true);
    const binaries = { ...DEFAULT_BINARIES, ...(opts.binaries ?? {}) };
    const avail = bwrapAvailable(binaries);
    if (!avail.ok) throw new ArborError(avail.message, "sandbox_unavailable");

    this.root = resolve(opts.root ?? join(tmpdir(), "arbor-sandboxes"));
    const uid = sandboxUid(opts.uid ?? DEFAULT_SANDBOX_UID);
    // Checked before anything is made or swept: a bad mount leaves no trace.
    const readOnlyMounts = checkReadOnlyMounts(opts.readOnlyMounts ?? [], { onThisHost: true, uid });
    mkdirSync(this.root, { recursive: true, mode: 0o755 });
    checkTraversable(this.root, uid);
    this.sweptOnStart = sweepStaleWorkspaces(this.root);
    // Their cgroups too (empty once the kernel has reaped their processes).
    if (opts.useCgroups ?? true) sweepStaleCgroups(ownedByDeadProcess);
    this.ctx = {
      limits: { ...l },
      clock: opts.clock ?? realClock,
      binaries,
      uid,
      maxProcesses,
      maxFileMb,
      tmpSizeMb,
      shmSizeMb,
      maxOutputBytes,
      workspaceMb,
      limitWorkspace: opts.limitWorkspace ?? true,
      sandboxMemoryMb,
      useCgroups: opts.useCgroups ?? true,
      readOnlyMounts,
    };
  }

  async create(programId: string): Promise<Sandbox> {
    if (this.live.size >= this.maxSandboxes) throw new CapacityError("bwrap sandbox provider", this.maxSandboxes);
    const safe = programId.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 48) || "program";
    const ws = await mkdtemp(join(this.root, `${ownerPrefix()}${safe}-`));
    let limited = false;
    let cgroup: SandboxCgroup | undefined;
    try {
      if (this.ctx.limitWorkspace) {
        const why = await mountWorkspaceTmpfs(ws, this.ctx.workspaceMb, this.ctx.uid);
        limited = why === undefined;
        if (why !== undefined) this.workspaceLimitNote ??= `workspace is not size-limited (cannot mount tmpfs: ${why})`;
      }
      if (!limited && this.ctx.uid !== null) chownSync(ws, this.ctx.uid, this.ctx.uid);
      if (this.ctx.useCgroups) {
        // +1: bwrap's monitor process, outside the sandbox's pid namespace, sits in the group too.
        cgroup = createSandboxCgroup(basename(ws), Math.floor(this.ctx.sandboxMemoryMb * 1024 * 1024), this.ctx.maxProcesses + 1);
      }
    } catch (e) {
      if (limited) await unmountWorkspace(ws);
      await rm(ws, { recursive: true, force: true });
      throw new ArborError(`sandbox ${programId}: cannot prepare the workspace: ${(e as Error).message}`, "sandbox");
    }
    const sb = new BwrapSandbox(
      programId,
      ws,
      this.ctx,
      (s) => {
        this.live.delete(s);
        unregisterExitCleanup(s);
      },
      cgroup,
      limited,
    );
    this.live.add(sb);
    registerExitCleanup(sb);
    return sb;
  }

  /** Number of sandboxes created and not yet destroyed. */
  get liveCount(): number {
    return this.live.size;
  }

  async destroyAll(): Promise<void> {
    const results = await Promise.allSettled([...this.live].map((s) => s.destroy()));
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed.length > 0) {
      throw new ArborError(`sandbox: ${failed.length} sandbox(es) failed to tear down: ${String(failed[0]?.reason)}`, "sandbox");
    }
  }
}

/** Create a bwrap provider; throws a clear ArborError when bubblewrap is unusable or options are bad. */
export function createBwrapProvider(opts: BwrapProviderOptions): BwrapProvider {
  return new BwrapProvider(opts);
}
