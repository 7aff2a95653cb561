// The processes `arbor bench gateway` starts beside itself, so that the gateway's CPU is its own:
// `upstream` (the fake vLLM-shaped engine: prints {"url"} and serves until its stdin closes; given a GGUF
// path, it tokenizes with that model's tokenizer and chat template) and `load`
// (the load generator: runs the plan given as JSON and prints its results). This file is the child's
// entry point (node runs it directly, compiled in dist/ or through tsx from src/) and the parent's
// way to start it.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import type { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { startFakeVllm } from "../backends/fake-vllm.js";
import { loadServedTokenizer } from "../backends/local-tokenizer.js";
import { ArborError } from "../core/errors.js";
import { runLoad, type LoadPlan, type LoadResult } from "./gateway-bench-load.js";

/** A started child: its first stdout line (parsed JSON) and how to stop it. */
export interface BenchChild {
  readonly process: ChildProcess;
  /** The first line the child printed, parsed. */
  readonly first: Promise<unknown>;
  /** Close its stdin (the signal to end), wait for its exit; kill it if it has not ended within `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** Longest stderr kept for an error message. */
const STDERR_TAIL_CHARS = 4000;
const ROLES = ["upstream", "load"] as const;

/**
 * Start this file as a child process in `role`. From the sources (a .ts module: tests, `arbor` through
 * tsx) node loads it through tsx's loader, resolved from the repository root; from dist/ it runs directly.
 */
export function startBenchChild(role: (typeof ROLES)[number], arg?: string): BenchChild {
  const self = fileURLToPath(import.meta.url);
  const fromSource = self.endsWith(".ts");
  const args = [...(fromSource ? ["--import", "tsx"] : []), self, role, ...(arg !== undefined ? [arg] : [])];
  const child = spawn(process.execPath, args, {
    cwd: fromSource ? fileURLToPath(new URL("../../", import.meta.url)) : process.cwd(),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    stderr = (stderr + d).slice(-STDERR_TAIL_CHARS);
  });
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  const first = new Promise<unknown>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", (line) => {
      try {
        resolve(JSON.parse(line));
      } catch {
        reject(new ArborError(`gateway bench: the ${role} process printed ${JSON.stringify(line.slice(0, 200))}, not JSON`));
      }
    });
    child.once("error", (e) => reject(new ArborError(`gateway bench: could not start the ${role} process: ${e.message}`)));
    void exited.then((code) => reject(new ArborError(`gateway bench: the ${role} process exited (code ${code}) before answering: ${stderr.trim() || "(no stderr)"}`)));
  });
  first.catch(() => undefined);
  return {
    process: child,
    first,
    async stop(graceMs = 5_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      try {
        await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Run one load plan in a child process (`started` gets its pid) and return its results. */
export async function loadInChild(plan: LoadPlan, started?: (pid: number) => void): Promise<LoadResult[]> {
  const child = startBenchChild("load", JSON.stringify(plan));
  if (child.process.pid !== undefined) started?.(child.process.pid);
  try {
    const out = (await child.first) as { results?: LoadResult[]; error?: string };
    if (out.error !== undefined) throw new ArborError(`gateway bench: the load generator failed: ${out.error}`);
    if (!Array.isArray(out.results)) throw new ArborError("gateway bench: the load generator printed no results");
    return out.results;
  } finally {
    await child.stop();
  }
}

/**
 * Write `value` as one JSON line to `out` and resolve once the stream has handed it on. Why: stdout on a pipe
 * is asynchronous on Linux, so a line longer than the pipe's buffer (the full bench's 20,000 latencies are
 * ~400 kB) is still queued when write() returns, and a process.exit() then would cut it off.
 */
export function writeJsonLine(out: Writable, value: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    out.write(`${JSON.stringify(value)}\n`, (e) => (e ? reject(e) : resolve()));
  });
}

/** The child's main: run `role` and print its one JSON line. */
async function childMain(argv: string[]): Promise<void> {
  const [role, arg] = argv;
  if (role === "upstream") {
    const tokenizer = arg !== undefined ? loadServedTokenizer(arg, "gateway bench upstream tokenizer") : undefined;
    const fake = await startFakeVllm({ recordRequests: false, ...(tokenizer ? { tokenizer } : {}) });
    await writeJsonLine(process.stdout, { url: fake.url });
    // The parent closes stdin to stop it (and a parent that died closes it too).
    process.stdin.resume();
    await new Promise((resolve) => process.stdin.once("end", resolve));
    await fake.close();
    return;
  }
  if (role === "load") {
    try {
      const results = await runLoad(JSON.parse(arg ?? "") as LoadPlan);
      await writeJsonLine(process.stdout, { results });
    } catch (e) {
      await writeJsonLine(process.stdout, { error: e instanceof Error ? e.message : String(e) });
    }
    return;
  }
  throw new ArborError(`gateway bench child: role must be one of ${ROLES.join(", ")}, got ${JSON.stringify(role)}`, "config");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  childMain(process.argv.slice(2)).then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    },
  );
}
