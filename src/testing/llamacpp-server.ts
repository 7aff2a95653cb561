// A real llama-server process for integration tests and fixture capture: where the binary built by
// scripts/build-llama-server.sh lives, and starting it on 127.0.0.1 with an ephemeral port.
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";

/** The llama-server binary, or why there is none. */
export type LlamaServerBinary = { path: string } | { missing: string };

/**
 * Find the llama-server binary: $ARBOR_LLAMA_SERVER, else the cache path scripts/build-llama-server.sh
 * builds into (${ARBOR_CACHE:-~/.cache/arbor}/llama-server/<bundle sha256[:16]>/llama-server).
 */
export function findLlamaServer(repoRoot: string, env: NodeJS.ProcessEnv = process.env): LlamaServerBinary {
  const explicit = env.ARBOR_LLAMA_SERVER;
  if (explicit) return isExecutable(explicit) ? { path: explicit } : { missing: `ARBOR_LLAMA_SERVER=${explicit} is not an executable file` };
  const bundle = join(repoRoot, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
  if (!existsSync(bundle)) return { missing: `no llama.cpp source bundle at ${bundle}` };
  const sha = createHash("sha256").update(readFileSync(bundle)).digest("hex").slice(0, 16);
  const path = join(env.ARBOR_CACHE || join(homedir(), ".cache/arbor"), "llama-server", sha, "llama-server");
  return isExecutable(path) ? { path } : { missing: `no llama-server at ${path} (build it with scripts/build-llama-server.sh, or set ARBOR_LLAMA_SERVER)` };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export interface LlamaServerOptions {
  binary: string;
  modelPath: string;
  /** Server slots (--parallel); each gets contextSize / slots tokens of KV. */
  slots: number;
  /** Total context (--ctx-size), split evenly over the slots. */
  contextSize: number;
  /** Directory for slot save/restore files (--slot-save-path). */
  slotSaveDir: string;
  /** F32 KV cache without flash attention, as Arbor's engine runs, so logprobs agree with it (default true). */
  exactKv?: boolean;
  clock?: Clock;
  /** How long to wait for the model to load (default 60 s). */
  startTimeoutMs?: number;
}

export interface LlamaServer {
  /** http://127.0.0.1:port (no trailing slash). */
  readonly url: string;
  /** The arguments it was started with (for the fixtures README). */
  readonly args: readonly string[];
  /** The last lines the server logged (for failure messages). */
  logTail(): string;
  close(): Promise<void>;
}

const LOG_LINES = 40;

/**
 * Start llama-server on 127.0.0.1 with an ephemeral port, one thread, no web UI and /metrics on,
 * and resolve once GET /health answers 200 (the model is loaded). Throws ArborError with the
 * server's last log lines when it exits or does not become healthy in time.
 */
export async function startLlamaServer(opts: LlamaServerOptions): Promise<LlamaServer> {
  const clock = opts.clock ?? realClock;
  const args = [
    "--model", opts.modelPath,
    "--host", "127.0.0.1",
    "--port", "0",
    "--threads", "1",
    "--threads-batch", "1",
    "--parallel", String(opts.slots),
    "--ctx-size", String(opts.contextSize),
    "--no-webui",
    "--metrics",
    "--slot-save-path", opts.slotSaveDir,
    "--no-warmup",
    // No host-RAM prompt cache: a slot's KV lives only in the slot (and in slot save files), so a
    // paused-and-erased program cannot come back through a side door.
    "--cache-ram", "0",
    ...(opts.exactKv ?? true ? ["--cache-type-k", "f32", "--cache-type-v", "f32", "--flash-attn", "off"] : []),
  ];
  const child = spawn(opts.binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  const lines: string[] = [];
  let port: number | undefined;
  let exited: string | undefined;
  const onData = (buf: Buffer) => {
    for (const line of buf.toString("utf8").split("\n")) {
      if (!line.trim()) continue;
      lines.push(line);
      if (lines.length > LOG_LINES) lines.shift();
      // llama-server binds before it loads the model and logs the address it got.
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
      if (m) port = Number(m[1]);
    }
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  child.on("error", (e) => (exited = `could not be started: ${e.message}`));
  child.on("exit", (code, signal) => (exited ??= `exited (${signal ?? `code ${code}`})`));
  const logTail = () => lines.join("\n");
  const fail = (why: string) => new ArborError(`llama-server ${opts.binary} ${why}; last log lines:\n${logTail()}`, "llama_server");

  const timeoutMs = opts.startTimeoutMs ?? 60_000;
  const deadline = clock.now() + timeoutMs;
  try {
    for (;;) {
      if (exited) throw fail(exited);
      if (clock.now() > deadline) throw fail(`was not healthy within ${timeoutMs} ms`);
      if (port !== undefined && (await healthy(`http://127.0.0.1:${port}`))) break;
      await clock.sleep(50);
    }
  } catch (e) {
    await stop(child, clock);
    throw e;
  }
  return { url: `http://127.0.0.1:${port}`, args, logTail, close: () => stop(child, clock) };
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/health`);
    await res.arrayBuffer();
    // 503 while the model loads.
    return res.status === 200;
  } catch {
    return false;
  }
}

async function stop(child: ChildProcess, clock: Clock): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  // llama-server finishes the running tasks on SIGTERM; a second signal forces it.
  const timer = clock.setTimer(5_000, () => child.kill("SIGKILL"));
  await done;
  timer.cancel();
}
