// The Environment interface: tasks, the tools an agent may call (run inside the program's sandbox),
// the checker behind the outcome reward (which may run hidden tests in that sandbox), golden
// solutions for SFT and validation, and the variants/perturbations a program is sampled into.
import type { ChatMessage, ToolEvent } from "../core/types.js";
import type { HygieneViolation } from "../sandbox/hygiene/access-policy.js";
import type { CleanupReport } from "../sandbox/hygiene/clean-artifacts.js";
import type { UnverifiedRun } from "../sandbox/hygiene/monitor.js";
import type { ExecOptions, ExecResult, Sandbox } from "../sandbox/sandbox.js";
import type { Tool, ToolResult } from "../agents/tool.js";
import type { EnvVariant } from "./variants.js";

// Tools belong to the agent layer (an agent calls them); environments declare theirs with these types.
export type { Tool, ToolResult };

export interface Task {
  id: string;
  /** The conversation that starts a program (system + user messages). */
  prompt: ChatMessage[];
  /** Environment-specific data the checker needs (e.g. the expected answer). */
  meta: Record<string, unknown>;
}

export interface CheckResult {
  /** Outcome score in [0, 1]. */
  score: number;
  detail: string;
}

/** What the checker may look at besides the task. */
export interface CheckContext {
  /** Text of the program's final assistant message. */
  finalAnswer: string;
  /** The program's sandbox, still alive: hidden tests run here. Absent for answer-only checks. */
  sandbox?: Sandbox;
  /** The program's tool events, in order. */
  tools?: readonly ToolEvent[];
}

export interface SetupOptions {
  /** The variant or perturbation this program was sampled into (see `variants()`). */
  variant?: EnvVariant;
}

/** What set-up did: the variant applied and the hygiene clean-up of the workspace. */
export interface SetupReport {
  variant?: string;
  cleanup?: CleanupReport;
}

/** Hygiene events of one program so far. */
export interface HygieneRecord {
  violations: HygieneViolation[];
  /** Tool runs whose file accesses could not be checked (killed before the trace came back). */
  unverified: UnverifiedRun[];
}

export interface HygieneConfig {
  /** A program with a hygiene violation ends as `hygiene_violation` with reward 0. */
  zeroRewardOnViolation: boolean;
  /** Stop the program at its first violation (the violating tool call ends the episode). */
  stopOnViolation?: boolean;
}

export interface Environment {
  readonly name: string;
  /** Deterministic task list for a seed. */
  tasks(count: number, seed: number): Task[];
  /**
   * Distinct tasks there are when the environment has a fixed pool (swe-mini: its task folders), so callers
   * can size their defaults; absent = tasks are generated without limit.
   */
  readonly taskCount?: number;
  tools(): Tool[];
  /** Prepare a fresh sandbox for a task (copy files in, apply the variant, clean artifacts). */
  setup(task: Task, sandbox: Sandbox, opts?: SetupOptions): Promise<SetupReport>;
  /** Score a finished program (its final answer and, where the env needs it, its sandbox). */
  check(task: Task, ctx: CheckContext): Promise<CheckResult>;
  /** The ideal conversation for a task (assistant turns written in the tool-call markup). */
  golden(task: Task): ChatMessage[];
  /**
   * The system prompt for models that call tools natively (OpenAI `tools`, the model's own
   * tool-call format): the task's system prompt without the markup instructions. Absent: the
   * environment runs in markup mode only (native-tools.ts).
   */
  readonly nativeSystemPrompt?: string;
  /**
   * Apply the golden solution directly in a sandbox that `setup` prepared (no model involved) and
   * return the final answer to check with it: "golden passes, empty fails" is testable per task.
   */
  solveGolden(task: Task, sandbox: Sandbox): Promise<string>;
  /** Variants and perturbations a program may be sampled into (none when absent or empty). */
  variants?(): readonly EnvVariant[];
  /** Hygiene rules of this environment instance. */
  readonly hygiene?: HygieneConfig;
  /** Hygiene events recorded for the program running in `sandbox`. */
  hygieneRecord?(sandbox: Sandbox): HygieneRecord;
  /**
   * Run a black-box agent's whole command in `sandbox` watched like the env's own tools (e.g. under
   * its hygiene monitor), so what it does lands in `hygieneRecord`; `origin` names the run there.
   * Absent: black boxes run with plain `sandbox.exec`.
   */
  agentExec?(sandbox: Sandbox, argv: string[], opts: ExecOptions, origin: { tool: string; input: string }): Promise<ExecResult>;
}
