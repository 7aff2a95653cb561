// The `clear-thinking` context policy: when a new user message arrives, the reasoning of earlier
// assistant turns (`<think>…</think>` spans) is dropped; their answers and tool calls stay.
import type { AgentMessage } from "../agent-message.js";
import type { ContextPolicy } from "./context-policy.js";

export interface ClearThinkingOptions {
  /** Opening and closing tags of a reasoning span (default `<think>` / `</think>`). */
  open?: string;
  close?: string;
}

/** Remove every complete reasoning span from `text`. */
export function stripThinking(text: string, open = "<think>", close = "</think>"): string {
  let out = "";
  let pos = 0;
  for (;;) {
    const a = text.indexOf(open, pos);
    if (a < 0) break;
    const b = text.indexOf(close, a + open.length);
    if (b < 0) break;
    out += text.slice(pos, a);
    pos = b + close.length;
  }
  return (out + text.slice(pos)).replace(/^\s+/, "");
}

/** Drop earlier reasoning when a new user message arrives. */
export function createClearThinkingPolicy(o: ClearThinkingOptions = {}): ContextPolicy {
  const open = o.open ?? "<think>";
  const close = o.close ?? "</think>";
  if (open === "" || close === "") throw new Error("context policy clear-thinking: open and close tags must not be empty");
  return {
    name: "clear-thinking",
    apply(view) {
      if (view.trigger !== "user-message") return undefined;
      let changed = 0;
      const messages = view.messages.map((m): AgentMessage => {
        if (m.role !== "assistant" || !m.content.includes(open)) return m;
        const content = stripThinking(m.content, open, close);
        if (content === m.content) return m;
        changed++;
        return { ...m, content };
      });
      if (changed === 0) return undefined;
      return { action: "clear-thinking", messages, detail: `reasoning removed from ${changed} assistant message(s)` };
    },
  };
}
