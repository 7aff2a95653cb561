import { describe, expect, it } from "vitest";
import { declaresTools, requestToolPlan } from "./tool-plan.js";

const tools = [{ type: "function", function: { name: "calc", parameters: { type: "object" } } }];

describe("requestToolPlan", () => {
  it("plans as the engine does", () => {
    expect(declaresTools({ tools })).toBe(true);
    expect(declaresTools({ tools: [] })).toBe(false);
    expect(requestToolPlan({})).toBeUndefined();
    expect(requestToolPlan({ tools, tool_choice: { type: "function", function: { name: "calc" } } })).toMatchObject({
      specs: [{ name: "calc", parameters: { type: "object" } }],
      parse: true,
      single: false,
      prefill: "<|tool_call|>calc ",
    });
  });

  it("answers a malformed body with a 400 naming the field", () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ tools: {} }, "tools: must be a list"],
      [{ tools: [{ type: "web_search" }] }, "tools[0].type: only function tools"],
      [{ tools: [{ type: "function" }] }, "tools[0].function: must be an object"],
      [{ tools: [{ type: "function", function: { name: "9x" } }] }, "tools[0].function.name: must be letters"],
      [{ tools: [{ type: "function", function: { name: "f", parameters: [] } }] }, "tools[0].function.parameters: must be a JSON Schema object"],
      [{ tools, tool_choice: "always" }, "tool_choice: must be"],
      [{ tools, tool_choice: { type: "function", function: { name: "rm" } } }, "tool_choice.function.name: no tool named 'rm'"],
      [{ tool_choice: "required" }, "tool_choice: requires tools"],
      [{ tools, parallel_tool_calls: "no" }, "parallel_tool_calls: must be a boolean"],
    ];
    for (const [body, msg] of bad) expect(() => requestToolPlan(body)).toThrow(msg);
  });
});
