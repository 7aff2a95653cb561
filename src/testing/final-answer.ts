// The final answer of a program: the text the policy produced in its last LLM call.
import type { Trajectory } from "../core/types.js";

/** The `outputText` of the call with the highest index, or "" for a program that made no call. */
export function finalAnswer(trajectory: Trajectory): string {
  let last: Trajectory["calls"][number] | undefined;
  for (const c of trajectory.calls) if (!last || c.index > last.index) last = c;
  return last?.outputText ?? "";
}
