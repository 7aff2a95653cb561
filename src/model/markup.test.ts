import { describe, expect, it } from "vitest";
import { formatToolCall, parseToolCalls } from "./markup.js";

describe("tool-call markup", () => {
  it("round-trips calls and keeps the surrounding text", () => {
    const text = `Let me compute. ${formatToolCall("calc", "12*7+3")} and ${formatToolCall("calc", "(1+2)/3")}`;
    const r = parseToolCalls(text);
    expect(r.calls).toEqual([
      { name: "calc", input: "12*7+3" },
      { name: "calc", input: "(1+2)/3" },
    ]);
    expect(r.malformed).toEqual([]);
    expect(r.rest).toBe("Let me compute.  and");
  });

  it("reports unclosed and nameless calls as malformed", () => {
    expect(parseToolCalls("<|tool_call|>calc 1+").malformed).toEqual(["<|tool_call|>calc 1+"]);
    expect(parseToolCalls("<|tool_call|> 9 <|/tool_call|>").malformed).toHaveLength(1);
    expect(parseToolCalls("Answer: 4").calls).toEqual([]);
  });

  it("rejects invalid tool names when formatting", () => {
    expect(() => formatToolCall("bad name", "x")).toThrow(/invalid tool name/);
  });
});
