// A reward of your own: the share of the program's tool calls that succeeded (0 when it called none), so a
// policy learns to use its calculator well. `reward.custom: ./my-reward.ts#toolSuccess` makes it a reward
// component named `tool-success` (the export's name in kebab-case), stored beside `outcome` in each reward.
// A scoring function gets the finished program's RewardContext and returns a number (or {value, steps}).
import type { RewardContext } from "arbor-rl";

export function toolSuccess(ctx: RewardContext): number {
  // `arbor:` events are Arbor's own (context management), not the agent's tool calls.
  const calls = ctx.trajectory.tools.filter((t) => !t.tool.startsWith("arbor:"));
  if (calls.length === 0) return 0;
  return calls.filter((t) => t.ok).length / calls.length;
}

/** Tokens a program may generate in this example (config.yaml `agent.maxTotalTokens`). */
const TOKEN_BUDGET = 96;

/**
 * A second reward: the share of the token budget the program left unused, so between two programs that do the
 * same, the shorter scores higher. It varies within a group where `toolSuccess` often does not.
 */
export function brevity(ctx: RewardContext): number {
  const used = ctx.trajectory.calls.reduce((n, c) => n + c.outputTokenIds.length, 0);
  return Math.max(0, 1 - used / TOKEN_BUDGET);
}
