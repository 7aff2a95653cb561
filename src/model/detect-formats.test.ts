import { describe, expect, it } from "vitest";
import { detectFormats } from "./detect-formats.js";

describe("detectFormats", () => {
  it("reads the tool-call and reasoning formats a template writes", () => {
    expect(detectFormats("{{ '<tool_call>\\n' }}{{ tool_call | tojson }}{{ '</tool_call>' }}")).toEqual({ toolParser: "hermes" });
    expect(detectFormats("<tool_call>…</tool_call>{% if x %}<think>\\n\\n</think>{% endif %}")).toEqual({ toolParser: "hermes", reasoningParser: "think" });
    expect(detectFormats("{{- '[TOOL_CALLS] [' }}")).toEqual({ toolParser: "mistral" });
    expect(detectFormats("{%- if message.role == 'ipython' %}{{ '<|python_tag|>' }}")).toEqual({ toolParser: "llama3_json" });
  });

  it("detects nothing in a template without tool calls, or without a template", () => {
    expect(detectFormats("{% for m in messages %}{{ m.content }}{% endfor %}")).toEqual({});
    expect(detectFormats(undefined)).toEqual({});
  });
});

describe("parser names in the run config", () => {
  it("are exactly the registered parsers (core/config.ts cannot import the registries)", async () => {
    const { TOOL_PARSER_NAMES, REASONING_PARSER_NAMES } = await import("../core/config.js");
    const { toolParserRegistry } = await import("./tool-parsers/registry.js");
    const { reasoningParserRegistry } = await import("./reasoning/registry.js");
    expect([...TOOL_PARSER_NAMES].sort()).toEqual([...toolParserRegistry.names()].sort());
    expect([...REASONING_PARSER_NAMES].sort()).toEqual([...reasoningParserRegistry.names()].sort());
  });

  it("detects only registered parsers", async () => {
    const { toolParserRegistry } = await import("./tool-parsers/registry.js");
    for (const t of ["<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"]) expect(toolParserRegistry.names()).toContain(detectFormats(t).toolParser);
  });
});
