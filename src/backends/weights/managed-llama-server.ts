// An Arbor-managed llama-server process. llama-server cannot load new weights in place, so the
// llamacpp-restart weight loader restarts it on each new GGUF; this module owns the process: it starts
// llama-server on 127.0.0.1 and keeps the same port across restarts (the gateway's URL for the engine
// stays valid), waits for it to be healthy within a bound, stops it with SIGTERM then SIGKILL within a
// bound, and never leaves a process behind (not even when Arbor itself exits).
//
// The llama-server routes Arbor relies on (llama.cpp tools/server/server.cpp, server-context.cpp, at the
// commit node-llama-cpp 3.21.1 bundles, 80fb11ac73e66d89eae2c6a91d8a77428fa733ed):
//   GET  /health            200 {"status":"ok"} once the model is loaded; 503 while it loads. The HTTP
//                           server binds before loading, and "listening on http://host:port" is logged
//                           after the model loaded (older builds logged it before).
//   GET  /props             {model_path (as given to -m), total_slots, default_generation_settings.n_ctx,
//                           eos_token, build_info, ...}
//   GET  /slots             [{id, n_ctx, is_processing, n_prompt_tokens (the slot's cached tokens; only
//                           present once the slot ran a task in this process), ...}] (on unless --no-slots)
//   POST /slots/:id?action=save     body {filename} (a plain name in --slot-save-path) →
//                           {id_slot, filename, n_saved, n_written, timings.save_ms}
//   POST /slots/:id?action=restore  body {filename} → {id_slot, filename, n_restored, n_read,
//                           timings.restore_ms}; 400 "Unable to restore slot: ..." for a missing file, a KV
//                           that does not fit the model, or invalid token ids
//   POST /slots/:id?action=erase    → {id_slot, n_erased}
//   Save, restore and erase wait (deferred tasks) while the slot is processing; all slot actions answer
//   501 without --slot-save-path. SIGTERM/SIGINT end the main loop (running generations are not finished:
//   their connections close); a second signal exits at once.
import { spawn, type ChildProcess } from "node:child_process";
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { realClock } from "../../core/real-clock.js";

/** Longest wait for a process's exit after SIGKILL, at least (ms). */
const KILL_WAIT_MS = 5_000;

export interface ManagedLlamaServerOptions {
  /** The engine's name, for error messages (default "llama-server"). */
  name?: string;
  /** The llama-server executable (see backends/llama-server-binary.ts `findLlamaServer`). */
  binary: string;
  /** Arguments before llama-server's own, for a wrapper command (tests run a fake through node); default none. */
  binaryArgs?: readonly string[];
  /** The GGUF served first. */
  modelPath: string;
  /** An existing directory for slot save/restore files (--slot-save-path). */
  slotSaveDir: string;
  /** Port on 127.0.0.1; 0 or absent: an ephemeral one, picked at the first start and kept on every restart. */
  port?: number;
  /** More llama-server arguments for every start (--parallel, --ctx-size, --threads, ...). */
  extraArgs?: readonly string[];
  /** The child's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  /** How long a start may take until /health answers 200 (default 120 s: big GGUFs load slowly). */
  startTimeoutMs?: number;
  /** How long SIGTERM may take before SIGKILL (default 10 s); SIGKILL gets as long again. */
  stopTimeoutMs?: number;
}

/** Longest wait for a process's output pipes to drain after it exited (ms). */
const DRAIN_WAIT_MS = 2_000;
/** How many log lines (stdout and stderr together) error messages quote, and how much of each. */
const LOG_LINES = 40;
const LINE_CHARS = 1_000;
/** Bound of one /health probe while waiting for a start. */
const PROBE_MS = 2_000;
/** The arguments the manager sets itself: a restart changes the model and keeps the host, port and save path. */
const OWN_ARGS = new Set(["-m", "--model", "--host", "--port", "--slot-save-path", "-mu", "--model-url", "-hf", "--hf-repo"]);
/** Pause between /health probes. */
const POLL_MS = 50;

interface Proc {
  child: ChildProcess;
  /** Set once the process ended (or could not be spawned): how, in words. */
  exited?: string;
  /** Resolves when the process has ended. */
  ended: Promise<void>;
  /** The port the process logged it listens on. */
  port?: number;
}

/**
 * One llama-server process at a time, on one port. Create it with {@link ManagedLlamaServer.start};
 * `restart(path)` serves another GGUF on the same URL. Operations are serialized.
 */
export class ManagedLlamaServer {
  readonly name: string;
  readonly slotSaveDir: string;
  private readonly clock: Clock;
  private fixedPort: number | undefined;
  private proc: Proc | undefined;
  private model: string;
  private lastArgs: string[] = [];
  private lines: string[] = [];
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(private readonly opts: ManagedLlamaServerOptions) {
    this.name = opts.name ?? "llama-server";
    this.slotSaveDir = opts.slotSaveDir;
    this.clock = opts.clock ?? realClock;
    this.fixedPort = opts.port ? opts.port : undefined;
    this.model = opts.modelPath;
    const owned = (opts.extraArgs ?? []).filter((a) => OWN_ARGS.has(a.split("=")[0] as string));
    if (owned.length) throw new ArborError(`llama-server '${this.name}' extraArgs: ${owned.join(", ")} is set by Arbor (modelPath, port, slotSaveDir)`, "config");
    const port = opts.port ?? 0;
    if (!(Number.isInteger(port) && port >= 0 && port <= 65535)) throw new ArborError(`llama-server '${this.name}' port: must be an integer in 0..65535, got ${port}`, "config");
  }

  /**
   * Start llama-server on `opts.modelPath` and resolve once it is healthy. Rejects with an ArborError
   * (code "llama_server") carrying the process's last log lines when it exits or is not healthy within
   * `startTimeoutMs`; no process is left running then.
   */
  static async start(opts: ManagedLlamaServerOptions): Promise<ManagedLlamaServer> {
    const s = new ManagedLlamaServer(opts);
    await s.startOn(opts.modelPath);
    return s;
  }

  /** http://127.0.0.1:port (no trailing slash); the same across restarts. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The port, fixed by the first successful start. */
  get port(): number {
    if (this.fixedPort === undefined) throw new ArborError(`llama-server '${this.name}' has not started yet`, "llama_server");
    return this.fixedPort;
  }

  /** The GGUF the running process serves (or the last one that ran, when stopped). */
  get modelPath(): string {
    return this.model;
  }

  /** The id of the running process, or of the last one (ended) when none runs; see `running`. */
  get pid(): number | undefined {
    return this.proc?.child.pid;
  }

  /** Whether a process is running (it may still be loading during a start). */
  get running(): boolean {
    return this.proc !== undefined && this.proc.exited === undefined;
  }

  /** The llama-server arguments of the last start. */
  get args(): readonly string[] {
    return this.lastArgs;
  }

  /** The last lines the current (or last) process logged. */
  logTail(): string {
    return this.lines.join("\n");
  }

  /**
   * Stop the running process and start one on `modelPath`, on the same port. On failure no process
   * runs and the error (ArborError "llama_server", with the new process's last log lines) is thrown;
   * the caller decides whether to start the previous GGUF again.
   * @param startTimeoutMs bound of this start (default: the `startTimeoutMs` option)
   */
  restart(modelPath: string, startTimeoutMs?: number): Promise<void> {
    return this.serialized(async () => {
      await this.stopNow();
      await this.startNow(modelPath, startTimeoutMs);
    });
  }

  /** Start on `modelPath` when no process runs (a no-op when one runs on that path; an error on another). */
  startOn(modelPath: string, startTimeoutMs?: number): Promise<void> {
    return this.serialized(async () => {
      if (this.running) {
        if (this.model === modelPath) return;
        throw new ArborError(`llama-server '${this.name}' already serves ${this.model}; restart it to serve ${modelPath}`, "llama_server");
      }
      await this.startNow(modelPath, startTimeoutMs);
    });
  }

  /** Stop the running process (SIGTERM, then SIGKILL after `stopTimeoutMs`); a later start may follow. */
  stop(): Promise<void> {
    return this.serialized(() => this.stopNow());
  }

  /** Stop the process for good; idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await this.serialized(() => this.stopNow());
  }

  private serialized<T>(op: () => Promise<T>): Promise<T> {
    const next = this.queue.then(op, op);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async startNow(modelPath: string, startTimeoutMs?: number): Promise<void> {
    if (this.closed) throw new ArborError(`llama-server '${this.name}' is closed`, "llama_server");
    const args = [
      "-m", modelPath,
      "--host", "127.0.0.1",
      "--port", String(this.fixedPort ?? 0),
      "--slot-save-path", this.slotSaveDir,
      ...(this.opts.extraArgs ?? []),
    ];
    this.lastArgs = args;
    this.lines = [];
    this.model = modelPath;
    const p = this.spawnProc(args);
    this.proc = p;
    const timeoutMs = startTimeoutMs ?? this.opts.startTimeoutMs ?? 120_000;
    const deadline = this.clock.now() + timeoutMs;
    const fail = (why: string) =>
      new ArborError(`llama-server '${this.name}' (${this.opts.binary}) on ${modelPath} ${why}; last log lines:\n${this.logTail()}`, "llama_server");
    try {
      for (;;) {
        if (p.exited !== undefined) throw fail(p.exited);
        if (this.clock.now() > deadline) throw fail(`had no answer "200 OK" to GET /health within ${timeoutMs} ms (still loading, or hung)`);
        // Wait for the process's own "listening on" line too: a /health answer alone could come from
        // another process that took the port while ours was loading.
        if (p.port !== undefined) {
          if (this.fixedPort !== undefined && p.port !== this.fixedPort) throw fail(`listens on port ${p.port}, not ${this.fixedPort}`);
          if (await this.healthy(`http://127.0.0.1:${p.port}`)) break;
        }
        await this.clock.sleep(POLL_MS);
      }
    } catch (e) {
      await this.stopNow();
      throw e;
    }
    this.fixedPort ??= p.port;
  }

  private spawnProc(args: string[]): Proc {
    const child = spawn(this.opts.binary, [...(this.opts.binaryArgs ?? []), ...args], { stdio: ["ignore", "pipe", "pipe"], env: this.opts.env ?? process.env });
    let endedResolve: () => void = () => {};
    const p: Proc = { child, ended: new Promise<void>((r) => (endedResolve = r)) };
    // Arbor exiting (even on an uncaught error) must not leave the engine running.
    const onParentExit = () => child.kill("SIGKILL");
    process.on("exit", onParentExit);
    const end = (how: string) => {
      p.exited ??= how;
      process.off("exit", onParentExit);
      endedResolve();
    };
    child.on("error", (e) => end(`could not be started: ${e.message}`));
    // "exit" can come before the last of the process's output has been read (a failed load's reason is
    // its last lines), so the end waits for "close" (every pipe drained), bounded in case a grandchild
    // holds a pipe open.
    child.on("exit", (code, signal) => {
      const how = `exited (${signal ?? `code ${code}`})`;
      const drained = this.clock.setTimer(DRAIN_WAIT_MS, () => end(how));
      child.once("close", () => {
        drained.cancel();
        end(how);
      });
    });
    const lines = this.lines;
    const take = (line: string) => {
      if (!line.trim()) return;
      lines.push(line.length > LINE_CHARS ? `${line.slice(0, LINE_CHARS)}… (${line.length} chars)` : line);
      if (lines.length > LOG_LINES) lines.shift();
      const m = /listening on https?:\/\/127\.0\.0\.1:(\d+)/.exec(line);
      if (m) p.port = Number(m[1]);
    };
    const read = (stream: NodeJS.ReadableStream | null) => {
      let partial = "";
      stream?.on("data", (buf: Buffer) => {
        const parts = (partial + buf.toString("utf8")).split("\n");
        partial = parts.pop() ?? "";
        if (partial.length > 4096) {
          parts.push(partial);
          partial = "";
        }
        for (const line of parts) take(line);
      });
      // A last line without its newline (a process that died mid-message) is still quoted.
      stream?.on("end", () => take(partial));
    };
    read(child.stdout);
    read(child.stderr);
    return p;
  }

  private async healthy(root: string): Promise<boolean> {
    const ac = new AbortController();
    const timer = this.clock.setTimer(PROBE_MS, () => ac.abort());
    try {
      const res = await fetch(`${root}/health`, { signal: ac.signal });
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    } finally {
      timer.cancel();
    }
  }

  private async stopNow(): Promise<void> {
    const p = this.proc;
    if (!p || p.exited !== undefined) return;
    const stopMs = this.opts.stopTimeoutMs ?? 10_000;
    p.child.kill("SIGTERM");
    const kill = this.clock.setTimer(stopMs, () => p.child.kill("SIGKILL"));
    let giveUp: (() => void) | undefined;
    // A killed process still needs the kernel and the event loop to report its exit: on a loaded
    // machine that takes more than a short stop timeout, so the wait after SIGKILL has a floor.
    const killWaitMs = Math.max(stopMs, KILL_WAIT_MS);
    const stuck = this.clock.setTimer(stopMs + killWaitMs, () => giveUp?.());
    try {
      const ended = await Promise.race([p.ended.then(() => true), new Promise<boolean>((r) => (giveUp = () => r(false)))]);
      if (!ended) throw new ArborError(`llama-server '${this.name}' (pid ${p.child.pid}) did not exit within ${killWaitMs} ms of SIGKILL`, "llama_server");
    } finally {
      kill.cancel();
      stuck.cancel();
    }
  }
}
