import { describe, expect, it } from "vitest";
import { createEnvironment } from "./registry.js";
import { nativeConversation, nativeTask } from "./native-tools.js";
import type { Environment } from "./env.js";

describe("native-tools", () => {
  const calc = createEnvironment("calc");
  const task = calc.tasks(1, 3)[0]!;

  it("swaps the system prompt for the native one and keeps the user turn", () => {
    const t = nativeTask(calc, task);
    expect(t.prompt[0]).toEqual({ role: "system", content: calc.nativeSystemPrompt });
    expect(t.prompt[0]!.content).not.toContain("<|tool_call|>");
    expect(t.prompt.slice(1)).toEqual(task.prompt.slice(1));
    expect(t.meta).toEqual(task.meta);
  });

  it("moves golden markup calls to toolCalls with the input as a JSON argument, and links the tool turn", () => {
    const golden = calc.golden(task);
    const native = nativeConversation(calc, golden);
    const expression = (task.meta as { expression: string }).expression;
    expect(native[2]).toEqual({ role: "assistant", content: "", toolCalls: [{ id: "call_2_0", name: "calc", arguments: JSON.stringify({ input: expression }) }] });
    expect(native[3]).toMatchObject({ role: "tool", name: "calc", toolCallId: "call_2_0" });
    expect(native[4]).toEqual(golden[4]);
  });

  it("refuses an environment without a native prompt, and malformed golden calls, naming the problem", () => {
    const markupOnly = { ...calc, nativeSystemPrompt: undefined } as Environment;
    expect(() => nativeTask(markupOnly, task)).toThrow(/environment 'calc' has no system prompt for native tool calls/);
    const broken = [{ role: "system" as const, content: "s" }, { role: "assistant" as const, content: "<|tool_call|>calc 1+1" }];
    expect(() => nativeConversation(calc, broken)).toThrow(/turn 1: malformed tool call/);
    expect(() => nativeConversation(calc, [{ role: "tool", content: "2" }])).toThrow(/no tool call before it/);
  });
});
