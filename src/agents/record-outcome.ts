// Writes what an episode produced besides its calls (which the gateway records as they happen):
// its tool events and context-management events, in order, while the program is still active.
import type { TrajectoryStore } from "../store/trajectory-store.js";
import type { AgentOutcome } from "./define-agent.js";

/** Record the outcome's tool and context events for its program (call before `endProgram`). */
export function recordAgentEvents(store: Pick<TrajectoryStore, "recordTool" | "recordContextEvent">, outcome: Pick<AgentOutcome, "tools" | "contextEvents">): void {
  for (const ev of outcome.tools) store.recordTool(ev);
  for (const ev of outcome.contextEvents) store.recordContextEvent(ev);
}
