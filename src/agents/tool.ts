// A tool an agent may call: its name and description (what the model is told) and how it runs on the raw
// argument text inside the program's sandbox. Environments (src/envs/) declare their tools with this type.
import type { Sandbox } from "../sandbox/sandbox.js";

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
