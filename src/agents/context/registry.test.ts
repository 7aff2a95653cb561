import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../agent-message.js";
import { stripThinking } from "./clear-thinking.js";
import type { ContextView } from "./context-policy.js";
import { describeContextPolicyContract, sampleConversation } from "./context-policy.contract.js";
import { createContextPolicy, CONTEXT_POLICIES } from "./registry.js";
import { extractiveSummary, SUMMARY_PREFIX, tailStart } from "./summarize.js";

describeContextPolicyContract("none", () => createContextPolicy({ name: "none" }));
describeContextPolicyContract("discard-all", (w) => createContextPolicy({ name: "discard-all", windowTokens: w, note: "reset" }));
describeContextPolicyContract("clear-thinking", () => createContextPolicy({ name: "clear-thinking" }));
describeContextPolicyContract("summarize", (w) => createContextPolicy({ name: "summarize", windowTokens: w, summarizer: "extractive" }));

const { initial, messages } = sampleConversation();
const view = (trigger: ContextView["trigger"], tokens: number, extra: Partial<ContextView> = {}): ContextView => ({
  trigger,
  messages,
  initial,
  tokens,
  callIndex: 4,
  countTokens: () => 0,
  signal: new AbortController().signal,
  ...extra,
});

describe("context policies", () => {
  it("are all in the registry, and bad configurations name the field", () => {
    expect(CONTEXT_POLICIES).toEqual(["none", "discard-all", "clear-thinking", "summarize"]);
    expect(() => createContextPolicy({ name: "forget-all" })).toThrow(/agent.context.name: .*policies: none, discard-all/);
    expect(() => createContextPolicy({ name: "discard-all" })).toThrow(/agent.context.windowTokens/);
    expect(() => createContextPolicy({ name: "discard-all", windowTokens: 100, threshold: 1.5 })).toThrow(/agent.context.threshold/);
    expect(() => createContextPolicy({ name: "none", extra: 1 })).toThrow(/agent.context/);
  });

  it("discard-all triggers past 80% of the window by default, only before a call", async () => {
    const p = createContextPolicy({ name: "discard-all", windowTokens: 1000 });
    expect(await p.apply(view("before-call", 800))).toBeUndefined();
    expect(await p.apply(view("user-message", 900))).toBeUndefined();
    expect(await p.apply(view("before-call", 801))).toEqual({ action: "discard", messages: initial });
    const half = createContextPolicy({ name: "discard-all", windowTokens: 1000, threshold: 0.5, note: "Context reset." });
    expect(await half.apply(view("before-call", 501))).toEqual({ action: "discard", messages: [...initial, { role: "user", content: "Context reset." }], detail: "Context reset." });
  });

  it("clear-thinking strips complete reasoning spans from assistant turns on a new user message", async () => {
    expect(stripThinking("<think>a</think>Answer: 1")).toBe("Answer: 1");
    expect(stripThinking("x <think>a</think> y <think>b</think>z")).toBe("x  y z");
    expect(stripThinking("<think>unclosed")).toBe("<think>unclosed");
    const p = createContextPolicy({ name: "clear-thinking" });
    expect(await p.apply(view("before-call", 99_999))).toBeUndefined();
    const c = await p.apply(view("user-message", 10));
    expect(c?.action).toBe("clear-thinking");
    expect(c?.detail).toBe("reasoning removed from 12 assistant message(s)");
    const assistants = c!.messages.filter((m) => m.role === "assistant");
    expect(assistants.every((m) => m.content === "Searching." && m.toolCalls?.length === 1)).toBe(true);
    // Nothing to remove: no change (and no event).
    expect(await p.apply(view("user-message", 10, { messages: c!.messages }))).toBeUndefined();
  });

  it("summarize keeps the task and the recent turns, summarizing the rest by model or extractively", async () => {
    expect(tailStart(messages, 2, 2)).toBe(messages.length - 3);
    expect(tailStart(messages, 2, 100)).toBe(2);
    const extractive = createContextPolicy({ name: "summarize", windowTokens: 1000, summarizer: "extractive", keepLast: 2 });
    const e = await extractive.apply(view("before-call", 900));
    expect(e?.action).toBe("summarize");
    expect(e!.messages.slice(0, 2)).toEqual(initial);
    expect(e!.messages[2]?.content.startsWith(SUMMARY_PREFIX)).toBe(true);
    expect(e!.messages.slice(3)).toEqual(messages.slice(-3));
    expect(e!.detail).toContain("assistant: <think>round 10: search more</think>Searching. [call search {\"q\":\"bridge 10\"}]");
    expect(e!.detail).not.toContain("bridge 11");
    expect(e!.detail).toContain("tool(search): result 10:");

    const asked: AgentMessage[][] = [];
    const byModel = createContextPolicy({ name: "summarize", windowTokens: 1000, summaryTokens: 64 });
    const m = await byModel.apply(
      view("before-call", 900, {
        complete: async (msgs, maxTokens) => {
          asked.push(msgs);
          expect(maxTokens).toBe(64);
          return { text: "  searched 10 times, nothing yet  ", completionTokens: 7 };
        },
      }),
    );
    expect(m?.detail).toBe("searched 10 times, nothing yet");
    expect(m!.messages[2]).toEqual({ role: "user", content: `${SUMMARY_PREFIX}searched 10 times, nothing yet` });
    expect(asked[0]?.[0]?.content).toMatch(/^Summarize the conversation below/);
    // Without model access the model summarizer falls back to the extractive one.
    expect((await byModel.apply(view("before-call", 900)))?.detail).toBe(e!.detail);
  });

  it("extractive summaries keep the most recent part when too long", () => {
    const s = extractiveSummary(messages, 100);
    expect(s.length).toBe(100);
    expect(s.startsWith("…")).toBe(true);
    expect(s.endsWith("user: Please hurry.")).toBe(true);
  });
});
