// The Docker sandbox provider (dockerode): one container per program — no network, read-only
// rootfs, the workspace a host directory bind-mounted at /workspace (a size-limited tmpfs where
// the host allows mounts, as for bwrap), memory/CPU/pids caps,
// per-process CPU-time and file-size rlimits — each command a `docker exec`, killed (its process
// tree) at the wall-clock limit, the container removed on destroy.
import { chownSync, existsSync, mkdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, posix, resolve } from "node:path";
import type { ContainerCreateOptions, ExecCreateOptions } from "dockerode";
import Dockerode from "dockerode";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { SANDBOX_WORKSPACE } from "./bwrap-args.js";
import { argumentsLimitResult, execSizeProblem } from "./exec-size.js";
import { checkLimits, counterGrowth, EXEC_KILL_GRACE_MS, LiveSandboxes, outputSink, positive, withinMs } from "./docker-k8s-shared.js";
import { containerSpec, countersSpec, execSpec, killSpec, parseCounters } from "./docker-spec.js";
import { classifyLimit } from "./limit-flags.js";
import { checkReadOnlyMounts } from "./read-only-mounts.js";
import type { ExecOptions, ExecResult, ReadOnlyMount, Sandbox, SandboxLimits, SandboxProvider } from "./sandbox.js";
import { CappedOutput, decodeStatus } from "./sandbox-process.js";
import { ownerPrefix } from "./stale-workspaces.js";
import { writeWorkspaceFile } from "./workspace-files.js";
import { freeBytes, mountWorkspaceTmpfs, unmountWorkspace } from "./workspace-mount.js";

/** The slice of a dockerode Exec the provider uses (fakes implement just this). */
export interface DockerExecLike {
  start(opts: { hijack: boolean; stdin: boolean }): Promise<NodeJS.ReadWriteStream>;
  inspect(): Promise<{ ExitCode: number | null; Running: boolean }>;
}

/** The slice of a dockerode Container the provider uses. */
export interface DockerContainerLike {
  readonly id: string;
  start(): Promise<unknown>;
  exec(opts: ExecCreateOptions): Promise<DockerExecLike>;
  remove(opts: { force: boolean; v: boolean }): Promise<unknown>;
}

/** The slice of a dockerode client the provider uses. */
export interface DockerClientLike {
  createContainer(opts: ContainerCreateOptions): Promise<DockerContainerLike>;
  ping(): Promise<unknown>;
  modem: { demuxStream(stream: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream): void };
}

export interface DockerProviderOptions {
  limits: SandboxLimits;
  /** Directory under which workspaces are created; the Docker engine must see the same path. */
  root?: string;
  clock?: Clock;
  /** Image every sandbox runs (default debian:bookworm-slim); it must have /bin/sh. */
  image?: string;
  /** A client (default: dockerode from DOCKER_HOST or /var/run/docker.sock). */
  client?: DockerClientLike;
  /** Container user (default "65534:65534"). */
  user?: string;
  /** CPUs per container (default 1). */
  cpus?: number;
  maxProcesses?: number;
  maxFileMb?: number;
  tmpSizeMb?: number;
  /** Size of each workspace, MiB (default 256; a tmpfs on the host directory where mounts are allowed). */
  workspaceMb?: number;
  limitWorkspace?: boolean;
  /** Memory cap of the whole container, MiB (default limits.memoryMb). */
  sandboxMemoryMb?: number;
  maxOutputBytes?: number;
  maxSandboxes?: number;
  /** Host folders every container sees read-only (a read-only bind volume), e.g. an agent's install. */
  readOnlyMounts?: readonly ReadOnlyMount[];
}

const DEFAULT_IMAGE = "debian:bookworm-slim";
/** Below this many free bytes a size-limited workspace counts as full. */
const FULL_BELOW_BYTES = 64 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Drain an exec's stream to its end (or error: the container went away). */
function ended(stream: NodeJS.ReadWriteStream): Promise<void> {
  return new Promise((res) => {
    stream.once("end", () => res());
    stream.once("close", () => res());
    stream.once("error", () => res());
  });
}

interface DockerContext {
  client: DockerClientLike;
  clock: Clock;
  limits: SandboxLimits;
  maxOutputBytes: number;
}

/** One program's container. */
class DockerSandbox implements Sandbox {
  private destroyed = false;
  private destroying: Promise<void> | undefined;
  private execSeq = 0;
  private readonly running = new Set<NodeJS.ReadWriteStream>();
  private counters = { oomKills: 0, pidsRefused: 0 };

  constructor(
    readonly programId: string,
    readonly hostWorkspace: string,
    private readonly container: DockerContainerLike,
    private readonly ctx: DockerContext,
    private readonly uid: number | null,
    private readonly onGone: (s: DockerSandbox) => void,
    /** Whether the workspace is a size-limited tmpfs mount. */
    readonly workspaceLimited: boolean,
  ) {}

  async exec(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    if (argv.length === 0) throw new ArborError(`sandbox ${this.programId}: exec: argv must not be empty`, "sandbox");
    for (const k of Object.keys(opts.env ?? {})) {
      if (!ENV_NAME.test(k)) throw new ArborError(`sandbox ${this.programId}: exec: env name '${k}' is invalid (letters, digits, _)`, "sandbox");
    }
    const tooBig = execSizeProblem(argv, opts.env);
    if (tooBig !== undefined) return argumentsLimitResult(tooBig);
    const wallMs = opts.wallMs ?? this.ctx.limits.wallMs;
    const cwd = opts.cwd === undefined ? SANDBOX_WORKSPACE : posix.resolve(SANDBOX_WORKSPACE, opts.cwd);
    const id = ++this.execSeq;
    const start = this.ctx.clock.now();
    const freeBefore = this.workspaceLimited ? await freeBytes(this.hostWorkspace) : undefined;
    const ex = await this.container.exec(execSpec(id, argv, cwd, opts.env));
    const stream = await ex.start({ hijack: true, stdin: true });
    this.running.add(stream);
    const out = new CappedOutput(this.ctx.maxOutputBytes);
    const err = new CappedOutput(this.ctx.maxOutputBytes);
    this.ctx.client.modem.demuxStream(stream, outputSink(out), outputSink(err));
    const done = ended(stream);
    stream.end(opts.stdin ?? "");
    let timedOut = false;
    let cutOff = (): void => {};
    const cut = new Promise<void>((res) => (cutOff = res));
    let grace: Timer | undefined;
    const timer = this.ctx.clock.setTimer(wallMs, () => {
      timedOut = true;
      void this.killExec(id);
      // The exec ends after the grace period even if a process the kill missed holds its stream open.
      grace = this.ctx.clock.setTimer(EXEC_KILL_GRACE_MS, cutOff);
    });
    try {
      await Promise.race([done, cut]);
    } finally {
      timer.cancel();
      grace?.cancel();
      this.running.delete(stream);
      (stream as unknown as { destroy?: () => void }).destroy?.();
    }
    let status: { exitCode: number | null; signal: string | null };
    if (this.destroyed) status = { exitCode: null, signal: "SIGKILL" };
    else {
      const info = await ex.inspect().catch(() => undefined);
      status = info ? decodeStatus(info.ExitCode, null) : { exitCode: null, signal: "SIGKILL" };
    }
    const r: ExecResult = { ...status, stdout: out.text(), stderr: err.text(), timedOut, durationMs: this.ctx.clock.now() - start };
    // Only a failed command can have hit a cgroup limit: read the counters then, not on every exec.
    const grown = r.exitCode !== 0 && !this.destroyed ? await this.counterGrowth() : { oomKills: 0, pidsRefused: 0 };
    const free = freeBefore !== undefined && !this.destroyed ? await freeBytes(this.hostWorkspace) : undefined;
    const diskFull = free !== undefined && free < FULL_BELOW_BYTES && (freeBefore ?? 0) >= FULL_BELOW_BYTES;
    const limit = classifyLimit({ ...r, ...grown, diskFull });
    return limit ? { ...r, limit } : r;
  }

  async writeFile(relPath: string, data: string | Uint8Array): Promise<void> {
    if (this.destroyed) throw new ArborError(`sandbox ${this.programId} is destroyed`, "sandbox");
    await writeWorkspaceFile(this.hostWorkspace, relPath, data, this.uid, this.programId);
  }

  destroy(): Promise<void> {
    this.destroying ??= this.teardown();
    return this.destroying;
  }

  private async teardown(): Promise<void> {
    this.destroyed = true;
    try {
      // Removing the container (force) kills every process in it and ends the exec streams.
      await this.container.remove({ force: true, v: true }).catch((e: { statusCode?: number }) => {
        if (e.statusCode !== 404) throw e;
      });
      for (const s of this.running) (s as unknown as { destroy?: () => void }).destroy?.();
    } finally {
      if (this.workspaceLimited) await unmountWorkspace(this.hostWorkspace);
      await rm(this.hostWorkspace, { recursive: true, force: true, maxRetries: 3 });
      this.onGone(this);
    }
  }

  /** Run a helper exec to its end and return its stdout. */
  private async helper(spec: ExecCreateOptions): Promise<string> {
    const ex = await this.container.exec(spec);
    const stream = await ex.start({ hijack: true, stdin: false });
    const out = new CappedOutput(64 * 1024);
    const err = new CappedOutput(64 * 1024);
    this.ctx.client.modem.demuxStream(stream, outputSink(out), outputSink(err));
    await ended(stream);
    return out.text();
  }

  private async killExec(id: number): Promise<void> {
    if (this.destroyed) return;
    await this.helper(killSpec(id)).catch(() => undefined);
  }

  /** Growth of the container's OOM-kill and refused-fork counters since the last read. */
  private async counterGrowth(): Promise<{ oomKills: number; pidsRefused: number }> {
    const now = parseCounters(await this.helper(countersSpec()).catch(() => ""));
    const grown = counterGrowth(this.counters, now);
    this.counters = now;
    return grown;
  }
}

/**
 * Whether a Docker engine answers here: DOCKER_HOST or /var/run/docker.sock, then a ping
 * (bounded by `timeoutMs`). The message says why not.
 */
export async function dockerAvailable(timeoutMs = 2000, clock: Clock = realClock): Promise<{ ok: boolean; message: string }> {
  const host = process.env.DOCKER_HOST;
  if (!host && !existsSync("/var/run/docker.sock")) {
    return { ok: false, message: "no Docker engine: DOCKER_HOST is unset and /var/run/docker.sock does not exist" };
  }
  const client = new Dockerode();
  try {
    await withinMs(clock, timeoutMs, () => client.ping());
    return { ok: true, message: "Docker engine answers" };
  } catch (e) {
    return { ok: false, message: `Docker engine at ${host ?? "/var/run/docker.sock"} does not answer: ${(e as Error).message}` };
  }
}

/** The Docker implementation of {@link SandboxProvider}. */
export class DockerProvider implements SandboxProvider {
  readonly name = "docker";
  readonly root: string;
  private readonly live: LiveSandboxes<DockerSandbox>;
  private readonly ctx: DockerContext;
  private readonly image: string;
  private readonly user: string;
  private readonly uid: number | null;
  private readonly o: Required<Pick<DockerProviderOptions, "cpus" | "maxProcesses" | "maxFileMb" | "tmpSizeMb" | "workspaceMb" | "sandboxMemoryMb" | "maxSandboxes">>;
  private readonly limitWorkspace: boolean;
  private readonly readOnlyMounts: ReadOnlyMount[];

  constructor(opts: DockerProviderOptions) {
    const l = opts.limits;
    checkLimits(l);
    this.o = {
      cpus: opts.cpus ?? 1,
      maxProcesses: opts.maxProcesses ?? 64,
      maxFileMb: opts.maxFileMb ?? 512,
      tmpSizeMb: opts.tmpSizeMb ?? 64,
      workspaceMb: opts.workspaceMb ?? 256,
      sandboxMemoryMb: opts.sandboxMemoryMb ?? l.memoryMb,
      maxSandboxes: opts.maxSandboxes ?? 1024,
    };
    for (const [k, v] of Object.entries(this.o)) positive(k, v);
    this.live = new LiveSandboxes("docker sandbox provider", this.o.maxSandboxes, "container(s)");
    this.limitWorkspace = opts.limitWorkspace ?? true;
    this.image = opts.image ?? DEFAULT_IMAGE;
    this.user = opts.user ?? "65534:65534";
    const uid = Number(this.user.split(":")[0]);
    this.uid = process.getuid?.() === 0 && Number.isInteger(uid) ? uid : null;
    this.readOnlyMounts = checkReadOnlyMounts(opts.readOnlyMounts ?? [], { onThisHost: true, uid: this.uid });
    this.root = resolve(opts.root ?? join(tmpdir(), "arbor-sandboxes"));
    mkdirSync(this.root, { recursive: true, mode: 0o755 });
    this.ctx = {
      client: opts.client ?? (new Dockerode() as unknown as DockerClientLike),
      clock: opts.clock ?? realClock,
      limits: { ...l },
      maxOutputBytes: opts.maxOutputBytes ?? 1024 * 1024,
    };
  }

  async create(programId: string): Promise<Sandbox> {
    this.live.checkRoom();
    const safe = programId.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 48) || "program";
    const ws = await mkdtemp(join(this.root, `${ownerPrefix()}${safe}-`));
    let container: DockerContainerLike | undefined;
    let limited = false;
    try {
      limited = this.limitWorkspace && (await mountWorkspaceTmpfs(ws, this.o.workspaceMb, this.uid)) === undefined;
      if (!limited && this.uid !== null) chownSync(ws, this.uid, this.uid);
      container = await this.ctx.client.createContainer(
        containerSpec({
          image: this.image,
          programId,
          hostWorkspace: ws,
          user: this.user,
          memoryMb: this.o.sandboxMemoryMb,
          cpus: this.o.cpus,
          cpuSeconds: this.ctx.limits.cpuSeconds,
          maxProcesses: this.o.maxProcesses,
          maxFileMb: this.o.maxFileMb,
          tmpSizeMb: this.o.tmpSizeMb,
          ownerPid: process.pid,
          readOnlyMounts: this.readOnlyMounts,
        }),
      );
      await container.start();
    } catch (e) {
      await container?.remove({ force: true, v: true }).catch(() => undefined);
      if (limited) await unmountWorkspace(ws);
      await rm(ws, { recursive: true, force: true });
      throw new ArborError(`sandbox ${programId}: cannot start a container from ${this.image}: ${(e as Error).message}`, "sandbox");
    }
    const sb = new DockerSandbox(programId, ws, container, this.ctx, this.uid, (s) => this.live.delete(s), limited);
    this.live.add(sb);
    return sb;
  }

  /** Number of containers created and not yet destroyed. */
  get liveCount(): number {
    return this.live.size;
  }

  destroyAll(): Promise<void> {
    return this.live.destroyAll();
  }
}

/** Create a docker provider (the engine is contacted on the first create). */
export function createDockerProvider(opts: DockerProviderOptions): DockerProvider {
  return new DockerProvider(opts);
}
