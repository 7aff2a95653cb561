// Writes what an episode produced besides its calls (which the gateway records as they happen):
// its tool events and context-management events, in order, while the program is still active.
import type { TrajectoryStore } from "../store/trajectory-store.js";
import type { AgentOutcome } from "./define-agent.js";

/** Record the outcome's tool and context events for its program, in order (before the program ends). */
export async function recordAgentEvents(store: Pick<TrajectoryStore, "recordTool" | "recordContextEvent">, outcome: Pick<AgentOutcome, "tools" | "contextEvents">): Promise<void> {
  // Issued together: a store applies one caller's writes in the order they were made.
  await Promise.all([...outcome.tools.map((ev) => store.recordTool(ev)), ...outcome.contextEvents.map((ev) => store.recordContextEvent(ev))]);
}
