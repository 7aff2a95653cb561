// One running sandboxed process: spawns the bwrap command line, feeds stdin, captures capped
// output, enforces the wall-clock limit with the injected Clock, and kills the whole sandbox.
import { spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { killSandboxLeftovers, pidNamespaceOf } from "./proc-scan.js";
import type { ExecResult } from "./sandbox.js";

export interface SandboxProcessOptions {
  stdin?: string;
  wallMs: number;
  /** Bytes kept per stream; the rest is drained and counted. */
  maxOutputBytes: number;
  clock: Clock;
  /** The fd (3+) on which bwrap writes its info JSON (see `--info-fd`). */
  infoFd: number;
  /**
   * Data written to fds `infoFd + 1`, `infoFd + 2`, …, from which bwrap reads its options
   * (`--args`) and its seccomp filter (`--seccomp`).
   */
  inputs?: Buffer[];
}

/** Keeps the first `limit` bytes of a stream and counts what it drops. */
export class CappedOutput {
  private chunks: Buffer[] = [];
  private kept = 0;
  private dropped = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    const room = this.limit - this.kept;
    if (room >= chunk.length) {
      this.chunks.push(chunk);
      this.kept += chunk.length;
      return;
    }
    if (room > 0) {
      this.chunks.push(chunk.subarray(0, room));
      this.kept += room;
    }
    this.dropped += chunk.length - Math.max(room, 0);
  }

  text(): string {
    const s = Buffer.concat(this.chunks).toString("utf8");
    return this.dropped > 0 ? `${s}\n[arbor: output truncated, ${this.dropped} more bytes dropped]` : s;
  }
}

const SIGNAL_NAMES = new Map<number, string>(
  Object.entries(osConstants.signals).map(([name, num]) => [num as number, name]),
);

/**
 * bwrap reports a command killed by signal N as exit status 128+N (like a shell), so a program that
 * exits with such a code on purpose reads as signalled; real programs rarely do.
 */
export function decodeStatus(code: number | null, signal: NodeJS.Signals | null): { exitCode: number | null; signal: string | null } {
  if (signal) return { exitCode: null, signal };
  if (code !== null && code > 128 && code < 128 + 32) {
    const name = SIGNAL_NAMES.get(code - 128);
    if (name) return { exitCode: null, signal: name };
  }
  return { exitCode: code, signal: null };
}

function tryKill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** A sandboxed process in flight. */
export class SandboxProcess {
  readonly result: Promise<ExecResult>;
  private initPid: number | undefined;
  private pidNs: number | undefined;
  private exited = false;
  private timedOut = false;
  private killRequested = false;
  private wallTimer: Timer | undefined;
  private readonly pid: number | undefined;

  constructor(argv: string[], opts: SandboxProcessOptions) {
    const [cmd, ...args] = argv;
    if (!cmd) throw new Error("SandboxProcess: empty command line");
    const start = opts.clock.now();
    const stdio: ("pipe" | "ignore")[] = ["pipe", "pipe", "pipe"];
    while (stdio.length < opts.infoFd) stdio.push("ignore");
    stdio.push("pipe");
    for (const _ of opts.inputs ?? []) stdio.push("pipe");
    // detached: bwrap leads its own process group, so one kill(-pgid) reaches all of it. A neutral
    // cwd and a bare environment: bwrap becomes the sandbox's pid 1, whose environment (with the
    // PWD a shell exports) every sandboxed process can read in /proc/1/environ.
    const child = spawn(cmd, args, { detached: true, stdio, cwd: "/", env: { PATH: "/usr/bin:/bin" } });
    this.pid = child.pid;
    const out = new CappedOutput(opts.maxOutputBytes);
    const err = new CappedOutput(opts.maxOutputBytes);
    child.stdout?.on("data", (c: Buffer) => out.push(c));
    child.stderr?.on("data", (c: Buffer) => err.push(c));

    let info = "";
    const infoStream = child.stdio[opts.infoFd] as NodeJS.ReadableStream | null | undefined;
    infoStream?.on("data", (c: Buffer) => {
      if (info.length > 4096) return;
      info += c.toString("utf8");
      this.parseInfo(info);
    });
    infoStream?.on("error", () => {});

    (opts.inputs ?? []).forEach((data, i) => {
      const stream = child.stdio[opts.infoFd + 1 + i] as NodeJS.WritableStream | null | undefined;
      stream?.on("error", () => {}); // bwrap may fail before reading it; its exit says why
      stream?.end(data);
    });

    child.stdin?.on("error", () => {}); // the command may exit without reading its input
    child.stdin?.end(opts.stdin ?? "");

    this.wallTimer = opts.clock.setTimer(opts.wallMs, () => {
      this.timedOut = true;
      this.kill();
    });

    this.result = new Promise<ExecResult>((resolve, reject) => {
      child.on("error", (e) => {
        this.finish();
        reject(new ArborError(`sandbox: cannot start ${cmd}: ${e.message}`, "sandbox"));
      });
      child.on("close", (code, signal) => {
        this.finish();
        const status = decodeStatus(code, signal);
        resolve({
          ...status,
          stdout: out.text(),
          stderr: err.text(),
          timedOut: this.timedOut,
          durationMs: opts.clock.now() - start,
        });
      });
    });
  }

  /** Pid namespace of the sandbox, once bwrap has reported it. */
  get pidNamespace(): number | undefined {
    return this.pidNs;
  }

  /**
   * Kill the whole sandbox, synchronously: SIGKILL to its pid 1 tears the pid namespace down (the
   * kernel kills everything in it), and SIGKILL to bwrap's process group ends bwrap itself (and
   * covers the setup phase, before pid 1 is known). Idempotent.
   */
  kill(): void {
    if (this.exited) return;
    this.killRequested = true;
    this.killInit();
    if (this.pid !== undefined) tryKill(-this.pid, "SIGKILL");
  }

  /**
   * SIGKILL what is left of the sandbox (see killSandboxLeftovers: never another sandbox that reuses its pid
   * namespace's inode number); returns how many processes were signalled, 0 once nothing of it is left.
   */
  killLeftovers(): number {
    if (this.initPid === undefined || this.pidNs === undefined) return 0;
    return killSandboxLeftovers({ initPid: this.initPid, pidNs: this.pidNs });
  }

  private killInit(): boolean {
    // Check the pid still belongs to the sandbox's namespace before signalling it (pid reuse).
    if (this.initPid === undefined || this.pidNs === undefined) return false;
    if (pidNamespaceOf(this.initPid) !== this.pidNs) return false;
    tryKill(this.initPid, "SIGKILL");
    return true;
  }

  private parseInfo(text: string): void {
    if (this.initPid !== undefined) return;
    const pid = /"child-pid"\s*:\s*(\d+)/.exec(text);
    const ns = /"pid-namespace"\s*:\s*(\d+)/.exec(text);
    if (!pid || !ns) return;
    this.initPid = Number(pid[1]);
    this.pidNs = Number(ns[1]);
    if (this.killRequested && !this.exited) this.killInit();
  }

  private finish(): void {
    this.exited = true;
    this.wallTimer?.cancel();
  }
}
