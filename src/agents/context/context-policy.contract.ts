// The shared contract every context policy passes (called from registry.test.ts for each one):
// it never mutates what it is shown, a change keeps the task messages first and never leaves a
// tool result without the call it answers, it is deterministic, and a small context before a
// call is left alone.
import { describe, expect, it } from "vitest";
import type { ContextAction } from "../../core/types.js";
import type { AgentMessage } from "../agent-message.js";
import type { ContextPolicy, ContextTrigger, ContextView } from "./context-policy.js";

const ACTIONS: readonly ContextAction[] = ["discard", "clear-thinking", "summarize"];

/** A long native-tool-calling conversation with reasoning spans, deep-frozen. */
export function sampleConversation(rounds = 12): { initial: AgentMessage[]; messages: AgentMessage[] } {
  const initial: AgentMessage[] = [
    { role: "system", content: "You are a search agent." },
    { role: "user", content: "Find the year the bridge opened." },
  ];
  const messages = [...initial];
  for (let i = 0; i < rounds; i++) {
    messages.push({ role: "assistant", content: `<think>round ${i}: search more</think>Searching.`, toolCalls: [{ id: `c${i}`, name: "search", arguments: `{"q":"bridge ${i}"}` }] });
    messages.push({ role: "tool", name: "search", toolCallId: `c${i}`, content: `result ${i}: ${"text ".repeat(30)}` });
  }
  messages.push({ role: "user", content: "Please hurry." });
  return { initial, messages: deepFreeze(messages) };
}

function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/** Tokens as the contract counts them: characters / 4 + 2 per message. */
function count(messages: readonly AgentMessage[]): number {
  return messages.reduce((n, m) => n + 2 + Math.ceil(m.content.length / 4), 0);
}

function view(messages: readonly AgentMessage[], initial: readonly AgentMessage[], trigger: ContextTrigger, tokens = count(messages)): ContextView {
  return { trigger, messages, initial, tokens, callIndex: 9, countTokens: count, signal: new AbortController().signal };
}

/** Register the contract tests for one policy. `make` builds it for a window of `windowTokens`. */
export function describeContextPolicyContract(name: string, make: (windowTokens: number) => ContextPolicy): void {
  describe(`ContextPolicy contract: ${name}`, () => {
    const { initial, messages } = sampleConversation();
    const window = Math.ceil(count(messages) / 2);

    it("leaves a small context alone before a call", async () => {
      const small = [...initial];
      expect(await make(window).apply(view(small, initial, "before-call", 10))).toBeUndefined();
    });

    for (const trigger of ["before-call", "user-message"] as const) {
      it(`on ${trigger}: does not mutate its input; a change keeps the task first and every tool result's call`, async () => {
        const p = make(window);
        expect(p.name).toBe(name);
        const change = await p.apply(view(messages, initial, trigger));
        if (!change) return;
        expect(ACTIONS).toContain(change.action);
        expect(change.messages.slice(0, initial.length)).toEqual(initial);
        expect(change.messages).not.toBe(messages);
        const calls = new Set<string>();
        for (const m of change.messages) {
          for (const c of m.toolCalls ?? []) calls.add(c.id);
          if (m.role === "tool" && m.toolCallId !== undefined) expect(calls.has(m.toolCallId)).toBe(true);
        }
        // Deterministic: the same view gives the same change.
        expect(await make(window).apply(view(messages, initial, trigger))).toEqual(change);
      });
    }
  });
}
