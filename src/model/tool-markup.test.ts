import { describe, expect, it } from "vitest";
import { planTools, ToolChoiceError, toolCallAnswer, toolCallsAsMarkup } from "./tool-markup.js";

const tools = [{ function: { name: "get_weather", description: "now", parameters: { type: "object" } } }, { function: { name: "noop", description: null } }];

describe("planTools", () => {
  it("declares the tools and forces a call's opening for required / a named tool", () => {
    expect(planTools({ tools })).toEqual({ specs: [{ name: "get_weather", description: "now", parameters: { type: "object" } }, { name: "noop" }], parse: true, single: false, parser: expect.objectContaining({ name: "arbor" }) });
    expect(planTools({ tools, tool_choice: "required" })?.prefill).toBe("<|tool_call|>");
    expect(planTools({ tools, tool_choice: { type: "function", function: { name: "noop" } }, parallel_tool_calls: false })).toMatchObject({ prefill: "<|tool_call|>noop ", single: true });
    expect(planTools({ tools, tool_choice: "none" })).toMatchObject({ parse: false });
    expect(planTools({})).toBeUndefined();
    expect(planTools({ tools: [], tool_choice: "none" })).toBeUndefined();
  });

  it("names the field of a tool_choice the tools cannot satisfy", () => {
    const err = (body: Parameters<typeof planTools>[0]) => {
      try {
        planTools(body);
      } catch (e) {
        return e instanceof ToolChoiceError ? [e.field, e.reason] : e;
      }
      return undefined;
    };
    expect(err({ tool_choice: "required" })).toEqual(["tool_choice", "requires tools"]);
    expect(err({ tools, tool_choice: { type: "function", function: { name: "rm" } } })).toEqual(["tool_choice.function.name", "no tool named 'rm' in tools"]);
  });
});

describe("toolCallAnswer / toolCallsAsMarkup", () => {
  it("reads a forced answer with its prefill, and writes calls back as the policy's markup", () => {
    const plan = planTools({ tools, tool_choice: { type: "function", function: { name: "get_weather" } } });
    const a = toolCallAnswer('{"city":"Oslo"}<|/tool_call|>', "stop", plan!, "call_x");
    expect(a).toEqual({ message: { role: "assistant", content: null, tool_calls: [{ id: "call_x_0", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] }, finishReason: "tool_calls" });
    expect(toolCallsAsMarkup("", a.message.tool_calls!)).toBe('<|tool_call|>get_weather {"city":"Oslo"}<|/tool_call|>');
  });
});
