// The Environment interface: tasks, the tools an agent may call (run inside the program's sandbox),
// the checker behind the outcome reward, and golden trajectories for SFT and validation.
import type { ChatMessage } from "../core/types.js";
import type { Sandbox } from "../sandbox/sandbox.js";

export interface Task {
  id: string;
  /** The conversation that starts a program (system + user messages). */
  prompt: ChatMessage[];
  /** Environment-specific data the checker needs (e.g. the expected answer). */
  meta: Record<string, unknown>;
}

export interface ToolResult {
  output: string;
  /** False when the tool failed (bad input, crash, limit); the agent still sees `output`. */
  ok: boolean;
  /** True when the tool process crashed or was killed (counts as a tool crash). */
  crashed?: boolean;
}

export interface Tool {
  name: string;
  description: string;
  /** Run the tool on the raw argument text the model emitted, inside `sandbox`. */
  run(input: string, sandbox: Sandbox): Promise<ToolResult>;
}

export interface CheckResult {
  /** Outcome score in [0, 1]. */
  score: number;
  detail: string;
}

export interface Environment {
  readonly name: string;
  /** Deterministic task list for a seed. */
  tasks(count: number, seed: number): Task[];
  tools(): Tool[];
  /** Prepare a fresh sandbox for a task (copy files in, etc.). */
  setup(task: Task, sandbox: Sandbox): Promise<void>;
  /** Score the final assistant answer of a program. */
  check(task: Task, finalAnswer: string): CheckResult;
  /** The ideal conversation for a task (assistant turns written in the tool-call markup). */
  golden(task: Task): ChatMessage[];
}
