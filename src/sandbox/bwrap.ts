// The bubblewrap sandbox provider (local default): one fresh workspace per program, every exec in
// new namespaces (no network, own pids), read-only system, per-process rlimits, wall-clock kill.
import { spawnSync } from "node:child_process";
import { constants as fsConstants, accessSync, chownSync, mkdirSync, rmSync, statSync } from "node:fs";
import { chown, lstat, mkdir, mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve, sep } from "node:path";
import type { Clock } from "../core/clock.js";
import { CapacityError, ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { buildBwrapArgv, DEFAULT_BINARIES, type SandboxBinaries } from "./bwrap-args.js";
import { ownerPrefix, sweepStaleWorkspaces } from "./stale-workspaces.js";
import { registerExitCleanup, unregisterExitCleanup, type SyncDisposable } from "./exit-cleanup.js";
import { killPidNamespace } from "./proc-scan.js";
import type { ExecOptions, ExecResult, Sandbox, SandboxLimits, SandboxProvider } from "./sandbox.js";
import { SandboxProcess } from "./sandbox-process.js";

/** Uid the sandbox runs as when Arbor itself runs as root ("nobody"). */
export const DEFAULT_SANDBOX_UID = 65534;
const INFO_FD = 3;
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
    infoFd: INFO_FD,
  });
  const r = spawnSync(argv[0] as string, argv.slice(1), {
    stdio: ["ignore", "ignore", "pipe", "pipe"],
    timeout: 10_000,
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
  maxOutputBytes: number;
}

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
  ) {}

  async exec(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    const wallMs = opts.wallMs ?? this.ctx.limits.wallMs;
    positive("wallMs", wallMs, false);
    let cmdline: string[];
    try {
      cmdline = buildBwrapArgv({
        binaries: this.ctx.binaries,
        hostWorkspace: this.hostWorkspace,
        argv,
        cwd: opts.cwd,
        env: opts.env,
        uid: this.ctx.uid,
        cpuSeconds: this.ctx.limits.cpuSeconds,
        memoryMb: this.ctx.limits.memoryMb,
        maxProcesses: this.ctx.maxProcesses,
        maxFileMb: this.ctx.maxFileMb,
        tmpSizeMb: this.ctx.tmpSizeMb,
        infoFd: INFO_FD,
      });
    } catch (e) {
      throw new ArborError(`sandbox ${this.programId}: ${(e as Error).message}`, "sandbox");
    }
    const proc = new SandboxProcess(cmdline, {
      stdin: opts.stdin,
      wallMs,
      maxOutputBytes: this.ctx.maxOutputBytes,
      clock: this.ctx.clock,
      infoFd: INFO_FD,
    });
    this.running.add(proc);
    try {
      return await proc.result;
    } finally {
      // Normally bwrap reaps its pid 1, which empties the namespace; if bwrap died first (killed,
      // or failed during setup), kill what is left and keep it listed for destroy() to wait on.
      const ns = proc.pidNamespace;
      if (ns === undefined || killPidNamespace(ns) === 0) this.running.delete(proc);
    }
  }

  async writeFile(relPath: string, data: string | Uint8Array): Promise<void> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    const target = resolve(this.hostWorkspace, relPath);
    if (relPath === "" || !target.startsWith(this.hostWorkspace + sep)) {
      throw new ArborError(`sandbox ${this.programId}: writeFile path '${relPath}' must stay inside the workspace`, "sandbox");
    }
    // The sandbox may have planted symlinks: never follow one (we write as the host user).
    const parts = target.slice(this.hostWorkspace.length + 1).split(sep);
    let dir = this.hostWorkspace;
    for (const part of parts.slice(0, -1)) {
      dir = join(dir, part);
      const st = await lstat(dir).catch(() => undefined);
      if (!st) {
        await mkdir(dir);
        if (this.ctx.uid !== null) await chown(dir, this.ctx.uid, this.ctx.uid);
      } else if (!st.isDirectory() || st.isSymbolicLink()) {
        throw new ArborError(`sandbox ${this.programId}: writeFile path '${relPath}': ${part} is not a directory`, "sandbox");
      }
    }
    const fh = await open(
      target,
      fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW,
      0o644,
    ).catch((e: NodeJS.ErrnoException) => {
      throw new ArborError(`sandbox ${this.programId}: cannot write '${relPath}': ${e.code ?? e.message}`, "sandbox");
    });
    try {
      await fh.writeFile(data);
      if (this.ctx.uid !== null) await fh.chown(this.ctx.uid, this.ctx.uid);
    } finally {
      await fh.close();
    }
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
      await rm(this.hostWorkspace, { recursive: true, force: true, maxRetries: 3 });
      this.onGone(this);
    }
  }

  /** bwrap has exited; wait until the kernel has also reaped every process in its pid namespaces. */
  private async waitNamespacesGone(procs: SandboxProcess[]): Promise<void> {
    const start = this.ctx.clock.now();
    for (const p of procs) {
      const ns = p.pidNamespace;
      if (ns === undefined) continue;
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
    rmSync(this.hostWorkspace, { recursive: true, force: true, maxRetries: 3 });
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

  constructor(opts: BwrapProviderOptions) {
    const l = opts.limits;
    if (!l || typeof l !== "object") throw new ArborError("sandbox: limits are required", "config");
    positive("limits.cpuSeconds", l.cpuSeconds, true);
    positive("limits.memoryMb", l.memoryMb, false);
    positive("limits.wallMs", l.wallMs, false);
    const maxProcesses = opts.maxProcesses ?? 64;
    const maxFileMb = opts.maxFileMb ?? 512;
    const tmpSizeMb = opts.tmpSizeMb ?? 64;
    const maxOutputBytes = opts.maxOutputBytes ?? 1024 * 1024;
    this.maxSandboxes = opts.maxSandboxes ?? 1024;
    positive("maxProcesses", maxProcesses, true);
    positive("maxFileMb", maxFileMb, false);
    positive("tmpSizeMb", tmpSizeMb, false);
    positive("maxOutputBytes", maxOutputBytes, true);
    positive("maxSandboxes", this.maxSandboxes, true);
    const binaries = { ...DEFAULT_BINARIES, ...(opts.binaries ?? {}) };
    const avail = bwrapAvailable(binaries);
    if (!avail.ok) throw new ArborError(avail.message, "sandbox_unavailable");

    this.root = resolve(opts.root ?? join(tmpdir(), "arbor-sandboxes"));
    const uid = sandboxUid(opts.uid ?? DEFAULT_SANDBOX_UID);
    mkdirSync(this.root, { recursive: true, mode: 0o755 });
    checkTraversable(this.root, uid);
    this.sweptOnStart = sweepStaleWorkspaces(this.root);
    this.ctx = {
      limits: { ...l },
      clock: opts.clock ?? realClock,
      binaries,
      uid,
      maxProcesses,
      maxFileMb,
      tmpSizeMb,
      maxOutputBytes,
    };
  }

  async create(programId: string): Promise<Sandbox> {
    if (this.live.size >= this.maxSandboxes) throw new CapacityError("bwrap sandbox provider", this.maxSandboxes);
    const safe = programId.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 48) || "program";
    const ws = await mkdtemp(join(this.root, `${ownerPrefix()}${safe}-`));
    if (this.ctx.uid !== null) chownSync(ws, this.ctx.uid, this.ctx.uid);
    const sb = new BwrapSandbox(programId, ws, this.ctx, (s) => {
      this.live.delete(s);
      unregisterExitCleanup(s);
    });
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
