// The `discard-all` context policy (used for search agents by several labs): once the context
// passes a share of the model's window, drop everything after the task's opening messages, and
// optionally tell the model that it happened with a note.
import type { AgentMessage } from "../agent-message.js";
import { thresholdTokens, type ContextPolicy } from "./context-policy.js";

export interface DiscardAllOptions {
  /** The model's context window, tokens. */
  windowTokens: number;
  /** Share of the window that triggers the reset (default 0.8). */
  threshold?: number;
  /** A user message appended after the reset (none by default). */
  note?: string;
}

/** Reset to the task messages when the context passes `threshold × windowTokens`. */
export function createDiscardAllPolicy(o: DiscardAllOptions): ContextPolicy {
  const limit = thresholdTokens("discard-all", o.windowTokens, o.threshold ?? 0.8);
  return {
    name: "discard-all",
    apply(view) {
      if (view.trigger !== "before-call" || view.tokens <= limit) return undefined;
      if (view.messages.length <= view.initial.length) return undefined;
      const messages: AgentMessage[] = [...view.initial];
      if (o.note !== undefined) messages.push({ role: "user", content: o.note });
      return { action: "discard", messages, ...(o.note !== undefined ? { detail: o.note } : {}) };
    },
  };
}
