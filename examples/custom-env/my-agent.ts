// An agent of your own: Arbor's tool loop for this run, changed. `arbor run` loads it from the config's
// `agent.module: ./my-agent.ts`; the default export is a factory given Arbor's definition (the environment's
// tools, the tool-call mode, the config's limits and context policy) that returns the agent to play programs.
// Types only come from arbor-rl, so the module needs nothing at run time but Node.
import type { AgentDefinition } from "arbor-rl";

/** The shop agent: one tool call at a time, and an answer without a final `Answer:` line is asked for once more. */
export default function shopAgent(base: AgentDefinition): AgentDefinition {
  return {
    ...base,
    name: "shop-agent",
    limits: { ...base.limits, maxParallelTools: 1 },
    onAnswer: (answer, turn) => (/Answer:\s*-?\d+/.test(answer) || turn > 1 ? undefined : "Give the final answer as: Answer: <number>"),
  };
}
