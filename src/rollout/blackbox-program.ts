// One rollout program played by a black-box agent: any command (e.g. a CLI coding agent built on
// the plain OpenAI client) run in the program's sandbox after the environment's set-up, with the
// task written where the command reads it. Its model calls reach the gateway through the
// black-box runner's per-program proxy, so the gateway records them as the program's trajectory;
// what Arbor sees of the run itself (command, exit, files it shipped in) is one `arbor:` event.
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join, posix, resolve } from "node:path";
import type { AgentLimits } from "../agents/define-agent.js";
import type { ToolCallMode } from "../agents/tool-modes.js";
import { runBlackBox, type BlackBoxOutcome } from "../agents/blackbox/blackbox-runner.js";
import type { RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import type { ContextEvent, Termination, ToolEvent } from "../core/types.js";
import type { Environment, Task } from "../envs/env.js";
import type { ExecOptions, Sandbox } from "../sandbox/sandbox.js";

/** Tool name of the event recording a black-box run (the `arbor:` prefix: not a model's tool call). */
export const BLACKBOX_EVENT_TOOL = "arbor:blackbox_run";

/** How a rollout runs its programs: Arbor's own tool loop, or a command treated as a black box. */
/** Who plays a program: Arbor's tool loop (markup or native tool calls), or a black-box command. */
export type AgentSpec = { kind: "white-box"; toolMode?: ToolCallMode; module?: string } | BlackBoxAgentSpec;

export interface BlackBoxAgentSpec {
  kind: "black-box";
  /** The command, as argv, run from /workspace. */
  command: string[];
  /** Files shipped into the workspace unchanged: workspace path → host path (relative to the working directory). */
  files?: Record<string, string>;
  /** Installed npm packages the command imports (read-only copies in /workspace/node_modules). */
  nodePackages?: string[];
  /**
   * The agent's install (`agent.install` as configured), mounted read-only at /opt/agent by the sandbox
   * provider. With it the command's HOME and XDG config/cache/data dirs are under /workspace/.home, writable.
   */
  install?: string;
  /** Workspace path the task text is written to before the command starts. */
  taskFile: string;
  /** Extra environment of the command. */
  env?: Record<string, string>;
  /** Wall-clock limit of the whole command, ms (default: the sandbox's per-exec limit). */
  wallMs?: number;
}

export interface BlackBoxProgramOptions {
  spec: BlackBoxAgentSpec;
  sandbox: Sandbox;
  programId: string;
  gatewayUrl: string;
  apiKey: string;
  /** The model the gateway serves, handed over as OPENAI_MODEL (the spec's env may override it). */
  model: string;
  task: Task;
  /** maxTurns bounds the model calls, maxTokensPerCall each call and maxTotalTokens all of them (enforced by the proxy). */
  limits: AgentLimits;
  /**
   * The environment, when it watches agents' commands (`agentExec`, e.g. swe-mini's hygiene
   * monitor): the whole command then runs under it and its violations are the program's.
   */
  env?: Pick<Environment, "agentExec">;
  /** Environment of the program's variant (e.g. TZ); the spec's own env wins on a clash. */
  variantEnv?: Record<string, string>;
  /** Model calls the gateway recorded for the program so far (the run's event follows the last). */
  recordedCalls: () => Promise<number>;
  /** Aborting kills the command's process tree (the sandbox goes with it) and ends the program as `aborted`. */
  signal?: AbortSignal;
}

/** The run in the shape the white-box loop reports its episode (for recording and judging alike). */
export interface BlackBoxProgramOutcome {
  termination: Termination;
  /** What the command printed on stdout (its final answer, for env checks that read one). */
  finalAnswer: string;
  /** One event: the run itself (see {@link BLACKBOX_EVENT_TOOL}); the black box's own tool calls are its business. */
  tools: ToolEvent[];
  contextEvents: ContextEvent[];
  /** Model calls the gateway recorded for the program. */
  calls: number;
  run: BlackBoxOutcome;
}

/** The agent config's spec (`agent.kind` etc. of a run config); throws naming the field when a shipped file is missing. */
export function agentSpecOf(agent: RunConfig["agent"]): AgentSpec {
  if (agent.kind === "white-box") return { kind: "white-box", toolMode: agent.toolMode, ...(agent.module !== undefined ? { module: agent.module } : {}) };
  if (agent.command === undefined) throw new ArborError("agent.command: required when kind is black-box", "config");
  const files: Record<string, string> = {};
  for (const [rel, host] of Object.entries(agent.files ?? {})) {
    workspacePath(`files.${rel}`, rel);
    const abs = resolve(host);
    if (!existsSync(abs)) throw new ArborError(`agent.files.${rel}: ${host} does not exist`, "config");
    files[rel] = abs;
  }
  return {
    kind: "black-box",
    command: agent.command,
    files,
    taskFile: workspacePath("taskFile", agent.taskFile),
    ...(agent.nodePackages ? { nodePackages: agent.nodePackages } : {}),
    ...(agent.install === undefined ? {} : { install: agent.install }),
    ...(agent.env ? { env: agent.env } : {}),
    ...(agent.wallMs === undefined ? {} : { wallMs: agent.wallMs }),
  };
}

/** The task as a black box reads it: the user turns of its prompt (the system turn is Arbor's tool-loop instructions). */
export function blackBoxTaskText(task: Task): string {
  const users = task.prompt.filter((m) => m.role === "user").map((m) => m.content.trim());
  if (users.length === 0) throw new ArborError(`black-box agent: task ${task.id} has no user message to hand over`, "env");
  return `${users.join("\n\n")}\n`;
}

/** Check that a workspace path stays inside the workspace. */
function workspacePath(field: string, p: string): string {
  const norm = posix.normalize(p);
  if (p === "" || norm.startsWith("/") || norm === ".." || norm.startsWith("../")) {
    throw new ArborError(`black-box agent: ${field} '${p}' must be a relative path inside the workspace`, "config");
  }
  return norm;
}

/** Workspace folder of an installed agent's HOME. */
export const AGENT_HOME = ".home";

/** Make the agent's HOME (and XDG folders) in the workspace, owned by the sandbox's user; its environment. */
async function agentHome(sandbox: Sandbox): Promise<Record<string, string>> {
  const home = `/workspace/${AGENT_HOME}`;
  const dirs = { XDG_CONFIG_HOME: ".config", XDG_CACHE_HOME: ".cache", XDG_DATA_HOME: ".local/share", XDG_STATE_HOME: ".local/state" };
  // writeFile creates the folders as the sandbox's user; the marker files say whose folder it is.
  for (const d of Object.values(dirs)) await sandbox.writeFile(`${AGENT_HOME}/${d}/.arbor-agent-home`, "");
  return { HOME: home, ...Object.fromEntries(Object.entries(dirs).map(([k, d]) => [k, `${home}/${d}`])) };
}

const sha256 = (b: Uint8Array): string => createHash("sha256").update(b).digest("hex");

/** Run the black box to its end in a sandbox the environment has set up. Throws only when the run cannot start. */
export async function runBlackBoxProgram(o: BlackBoxProgramOptions): Promise<BlackBoxProgramOutcome> {
  const taskFile = workspacePath("taskFile", o.spec.taskFile);
  await o.sandbox.writeFile(taskFile, blackBoxTaskText(o.task));
  // Shipped byte for byte; the copies are hashed as they lie in the workspace when the command starts.
  const shipped: { path: string; sha256: string; bytes: number }[] = [];
  for (const [rel, host] of Object.entries(o.spec.files ?? {})) {
    const path = workspacePath(`files.${rel}`, rel);
    let data: Buffer;
    try {
      data = await readFile(resolve(host));
    } catch (e) {
      throw new ArborError(`black-box agent: cannot read files.${rel} from ${host}: ${(e as Error).message}`, "config");
    }
    await o.sandbox.writeFile(path, data);
    const copy = await readFile(join(o.sandbox.hostWorkspace, path));
    shipped.push({ path, sha256: sha256(copy), bytes: copy.length });
  }
  // An installed agent keeps its settings, sessions and caches in a HOME of its own in the workspace (the
  // install itself is read-only and shared by every program).
  const home = o.spec.install === undefined ? {} : await agentHome(o.sandbox);
  if (o.signal?.aborted) throw new ArborError("black-box agent: run aborted before the command started", "aborted");
  // Named like the run's event, so hygiene records attribute violations to it (judgeProgram).
  const origin = { tool: BLACKBOX_EVENT_TOOL, input: JSON.stringify(o.spec.command) };
  const agentExec = o.env?.agentExec?.bind(o.env);
  const run = await runBlackBox({
    sandbox: o.sandbox,
    programId: o.programId,
    gatewayUrl: o.gatewayUrl,
    apiKey: o.apiKey,
    command: o.spec.command,
    env: { ...(o.variantEnv ?? {}), ...home, OPENAI_MODEL: o.model, ...(o.spec.env ?? {}) },
    ...(o.spec.nodePackages?.length ? { nodePackages: o.spec.nodePackages } : {}),
    ...(o.spec.wallMs === undefined ? {} : { wallMs: o.spec.wallMs }),
    maxCalls: o.limits.maxTurns,
    maxTotalTokens: o.limits.maxTotalTokens,
    maxTokensPerCall: o.limits.maxTokensPerCall,
    ...(agentExec ? { exec: (sandbox: Sandbox, argv: string[], opts: ExecOptions) => agentExec(sandbox, argv, opts, origin) } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
  });
  const termination: Termination = run.termination;
  const calls = await o.recordedCalls();
  const event: ToolEvent = {
    programId: o.programId,
    callIndex: Math.max(0, calls - 1),
    tool: BLACKBOX_EVENT_TOOL,
    input: origin.input,
    output: JSON.stringify({
      termination,
      exitCode: run.exitCode,
      signal: run.signal,
      files: shipped,
      ...(o.spec.install === undefined ? {} : { install: o.spec.install }),
      proxy: run.proxy,
      stderrTail: run.stderr.slice(-2000),
    }),
    ok: termination.kind === "completed",
    durationMs: run.exec.durationMs,
  };
  return { termination, finalAnswer: run.stdout.trim(), tools: [event], contextEvents: [], calls, run };
}
