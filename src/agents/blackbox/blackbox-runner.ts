// Black-box agents: run ANY command in the program's sandbox with OPENAI_BASE_URL, OPENAI_API_KEY,
// ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN pointing at the program's gateway endpoint. The
// sandbox has no network: its one way out is a launcher-run forwarder on 127.0.0.1 inside it, to
// a Unix socket in the workspace, served by a host proxy that reaches only this program's routes.
// Every call the command makes is recorded by the gateway as the program's trajectory.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ArborError } from "../../core/errors.js";
import type { Termination } from "../../core/types.js";
import type { ExecOptions, ExecResult, Sandbox } from "../../sandbox/sandbox.js";
import { classifyExec, mentionsOutOfMemory } from "../sandbox-outcome.js";
import { GatewayProxy, type ProxyStats } from "./gateway-proxy.js";
import { LAUNCHER_MARK, LAUNCHER_SOURCE } from "./launcher-source.js";
import { copyNodePackages } from "./node-packages.js";
import type { OverCapPolicy } from "./token-cap.js";

/** Arbor's directory in the workspace (owned by the host user: the sandbox can read, not change it). */
export const ARBOR_DIR = ".arbor";
/** Port of the forwarder inside the sandbox's own network namespace (no clash: each exec has its own). */
export const DEFAULT_FORWARD_PORT = 47080;
const NODE = "/usr/bin/node";

/**
 * How the launcher (and with it the whole agent process tree) is run in the sandbox. The
 * environment supplies one that watches the run like its own tools (e.g. traced by its hygiene
 * monitor); the default is the plain `sandbox.exec`.
 */
export type AgentExec = (sandbox: Sandbox, argv: string[], opts: ExecOptions) => Promise<ExecResult>;

export interface BlackBoxOptions {
  sandbox: Sandbox;
  programId: string;
  /** Gateway origin (http://host:port). */
  gatewayUrl: string;
  /** The program's key from the gateway (POST /programs). */
  apiKey: string;
  /** The command, as argv (run from /workspace). */
  command: string[];
  env?: Record<string, string>;
  /** Files written into the workspace before the run (path relative to the workspace → content), byte for byte. */
  files?: Record<string, string | Uint8Array>;
  /** Installed npm packages made importable from the workspace (read-only copies). */
  nodePackages?: string[];
  /** Wall-clock limit of the whole command, ms (default: the sandbox's own). */
  wallMs?: number;
  /** Model calls allowed; the next one is refused and the program ends as `max_turns`. */
  maxCalls?: number;
  /** Generated tokens allowed; once reached, the next call is refused and the program ends as `max_tokens`. */
  maxTotalTokens?: number;
  /** Tokens one model call may generate (agent.maxTokensPerCall), enforced by the proxy on every request. */
  maxTokensPerCall?: number;
  /** A request asking for more than maxTokensPerCall is lowered to it ("clamp", default) or refused with 400 ("refuse"). */
  overCap?: OverCapPolicy;
  /** Runs the launcher in the sandbox (default `sandbox.exec`); see {@link AgentExec}. */
  exec?: AgentExec;
  /**
   * Aborting kills the agent's whole process tree (by tearing the sandbox down: the sandbox is the
   * one thing that reliably holds every process the agent started) and ends the run as `aborted`.
   */
  signal?: AbortSignal;
  /** Forwarder port inside the sandbox (default 47080). */
  port?: number;
  /**
   * Add `--disable-wasm-trap-handler` to NODE_OPTIONS (default true) so Node programs' fetch works
   * under the sandbox's address-space limit (see nodeOptions). Turn off for a Node without the flag.
   */
  nodeWasmWorkaround?: boolean;
}

export interface BlackBoxOutcome {
  termination: Termination;
  /** The command's own exit (null when it never ran or was killed with the sandbox). */
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  /** The command's stderr, without the launcher's report. */
  stderr: string;
  proxy: ProxyStats;
  exec: ExecResult;
}

interface LauncherReport {
  code?: number | null;
  signal?: string | null;
  spawnError?: string;
  error?: string;
}

/** Run one black-box program to its end. Throws only if the run cannot be set up at all (or was aborted before it started). */
export async function runBlackBox(o: BlackBoxOptions): Promise<BlackBoxOutcome> {
  if (o.command.length === 0) throw new ArborError("blackbox: command must not be empty", "config");
  if (o.signal?.aborted) throw new ArborError(`blackbox: run aborted before the command started: ${reasonOf(o.signal)}`, "aborted");
  const ws = o.sandbox.hostWorkspace;
  const dir = join(ws, ARBOR_DIR);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await writeFile(join(dir, "launch.mjs"), LAUNCHER_SOURCE, { mode: 0o644 });
  for (const [rel, data] of Object.entries(o.files ?? {})) await o.sandbox.writeFile(rel, data);
  if (o.nodePackages && o.nodePackages.length > 0) await copyNodePackages(ws, o.nodePackages);

  const proxy = new GatewayProxy({
    socketPath: join(dir, "gateway.sock"),
    gatewayUrl: o.gatewayUrl,
    programId: o.programId,
    ...(o.maxCalls === undefined ? {} : { maxCalls: o.maxCalls }),
    ...(o.maxTotalTokens === undefined ? {} : { maxTotalTokens: o.maxTotalTokens }),
    ...(o.maxTokensPerCall === undefined ? {} : { maxTokensPerCall: o.maxTokensPerCall }),
    ...(o.overCap === undefined ? {} : { overCap: o.overCap }),
  });
  await proxy.start();
  // No per-exec kill in the Sandbox interface, and an agent may setsid/double-fork out of any
  // process group: destroying the sandbox is what ends every process it started.
  const onAbort = (): void => void o.sandbox.destroy().catch(() => undefined);
  o.signal?.addEventListener("abort", onAbort, { once: true });
  let exec: ExecResult;
  try {
    const port = String(o.port ?? DEFAULT_FORWARD_PORT);
    const run = o.exec ?? ((sb: Sandbox, argv: string[], opts: ExecOptions) => sb.exec(argv, opts));
    exec = await run(o.sandbox, [NODE, `/workspace/${ARBOR_DIR}/launch.mjs`, port, `/workspace/${ARBOR_DIR}/gateway.sock`, "--", ...o.command], {
      env: {
        ...(o.env ?? {}),
        ...(o.nodeWasmWorkaround === false ? {} : { NODE_OPTIONS: nodeOptions(o.env?.NODE_OPTIONS) }),
        ARBOR_PROGRAM_ID: o.programId,
        ARBOR_PROGRAM_KEY: o.apiKey,
      },
      ...(o.wallMs === undefined ? {} : { wallMs: o.wallMs }),
    });
  } catch (e) {
    // Killed with its sandbox: the exec (or the trace read after it) may fail instead of returning.
    if (!o.signal?.aborted) throw e;
    exec = { exitCode: null, signal: "SIGKILL", stdout: "", stderr: "", timedOut: false, durationMs: 0 };
  } finally {
    o.signal?.removeEventListener("abort", onAbort);
    await proxy.close();
  }
  const { report, stderr } = splitReport(exec.stderr);
  const out = { exitCode: report?.code ?? null, signal: report?.signal ?? null, stdout: exec.stdout, stderr, proxy: { ...proxy.stats }, exec };
  const termination: Termination = o.signal?.aborted ? { kind: "aborted", detail: `run aborted: ${reasonOf(o.signal)}` } : terminationOf(exec, report, stderr, proxy.stats, o);
  return { termination, ...out };
}

function reasonOf(signal: AbortSignal): string {
  return signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
}

/**
 * NODE_OPTIONS for Node programs in the sandbox. Under an address-space limit (RLIMIT_AS) V8
 * cannot reserve the ~10 GiB guard region of each WebAssembly memory, and Node's own fetch
 * (undici's llhttp) is WebAssembly: without the trap handler it uses bounds checks instead.
 */
function nodeOptions(given: string | undefined): string {
  const flag = "--disable-wasm-trap-handler";
  if (given === undefined || given.trim() === "") return flag;
  return given.includes(flag) ? given : `${given} ${flag}`;
}

/** The launcher's report (its last marked line) and the command's own stderr. */
export function splitReport(stderr: string): { report?: LauncherReport; stderr: string } {
  const at = stderr.lastIndexOf(`\n${LAUNCHER_MARK}`);
  if (at < 0) return { stderr };
  const line = stderr.slice(at + 1 + LAUNCHER_MARK.length).split("\n")[0] ?? "";
  try {
    return { report: JSON.parse(line) as LauncherReport, stderr: stderr.slice(0, at) };
  } catch {
    return { stderr };
  }
}

function tail(text: string): string {
  const t = text.trim().split("\n").slice(-3).join(" | ");
  return t.length > 300 ? `…${t.slice(-300)}` : t;
}

/** How the program ended, from the exec, the launcher's report and what the proxy saw. */
function terminationOf(exec: ExecResult, report: LauncherReport | undefined, stderr: string, stats: ProxyStats, o: BlackBoxOptions): Termination {
  const end = classifyExec(exec);
  if (end === "timeout") return { kind: "timeout", detail: `wall-clock limit: killed after ${Math.round(exec.durationMs)} ms` };
  if (end === "oom" || exec.limit === "memory") return { kind: "sandbox_oom", detail: tail(stderr) || "killed by the sandbox's memory limit" };
  if (!report) return { kind: "sandbox_error", detail: `the launcher did not report (exit ${exec.exitCode}, signal ${exec.signal}): ${tail(stderr)}` };
  if (report.error) return { kind: "sandbox_error", detail: report.error };
  if (report.spawnError) return { kind: "agent_error", detail: `cannot start the command: ${report.spawnError}` };
  if (report.code === 0) return { kind: "completed" };
  if (mentionsOutOfMemory(stderr)) return { kind: "sandbox_oom", detail: tail(stderr) };
  if (stats.callLimitHit) return { kind: "max_turns", detail: `${o.maxCalls} model calls` };
  if (stats.tokenLimitHit) return { kind: "max_tokens", detail: `${stats.generatedTokens} tokens generated (limit ${o.maxTotalTokens})` };
  const how = report.signal ? `killed by ${report.signal}` : `exit ${report.code}`;
  if (stats.upstreamFailures > 0 && (stats.lastStatus >= 500 || stats.lastStatus === 0)) {
    return { kind: "engine_error", detail: `the gateway failed a call (status ${stats.lastStatus}); the command then ended (${how})` };
  }
  if (exec.limit !== undefined && exec.limit !== "wall") return { kind: "tool_crash", detail: `sandbox ${exec.limit} limit: ${how}: ${tail(stderr)}` };
  return { kind: "agent_error", detail: `${how}: ${tail(stderr)}` };
}
