// Context management as an explicit agent action (Forge): a policy looks at the conversation at
// two moments — before each model call, and when a new user message arrives — and may replace
// it. Every replacement becomes a ContextEvent in the trajectory, so training sees where it was.
import type { ContextAction } from "../../core/types.js";
import type { AgentMessage } from "../agent-message.js";

export type ContextTrigger = "before-call" | "user-message";

/** What a policy is shown. */
export interface ContextView {
  trigger: ContextTrigger;
  /** The whole conversation now. */
  messages: readonly AgentMessage[];
  /** The task's opening messages (what a reset returns to). */
  initial: readonly AgentMessage[];
  /** Tokens of `messages` (exact for what the engine measured, estimated for the rest). */
  tokens: number;
  /** Index of the next model call of the program. */
  callIndex: number;
  /** Count tokens of other messages the same way. */
  countTokens(messages: readonly AgentMessage[]): number;
  /** Aborted when the episode ends early. */
  signal: AbortSignal;
  /**
   * Ask the model through the program's own endpoint (absent when the agent has no model access).
   * Such calls are recorded in the program's trajectory and count against its token budget.
   */
  complete?: (messages: AgentMessage[], maxTokens: number) => Promise<{ text: string; completionTokens: number }>;
}

/** A change a policy made. */
export interface ContextChange {
  action: ContextAction;
  messages: AgentMessage[];
  /** What replaced the dropped part (summary, note), recorded with the event. */
  detail?: string;
}

export interface ContextPolicy {
  readonly name: string;
  /** Return a change, or undefined to keep the context as it is. Must not mutate `view.messages`. */
  apply(view: ContextView): ContextChange | undefined | Promise<ContextChange | undefined>;
}

/** Check a "share of the window" threshold and the window size; returns the trigger size in tokens. */
export function thresholdTokens(policy: string, windowTokens: number, threshold: number): number {
  if (!(Number.isInteger(windowTokens) && windowTokens > 0)) {
    throw new Error(`context policy ${policy}: windowTokens must be a positive integer, got ${windowTokens}`);
  }
  if (!(threshold > 0 && threshold <= 1)) throw new Error(`context policy ${policy}: threshold must be in (0, 1], got ${threshold}`);
  return Math.floor(windowTokens * threshold);
}
