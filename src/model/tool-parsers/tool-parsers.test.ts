import { describe, expect, it } from "vitest";
import { toolParserRegistry } from "./registry.js";
import { mistralCallId } from "./mistral-parser.js";
import { parsePieces, toolParserContract } from "./tool-parser.contract.js";

for (const name of toolParserRegistry.names()) toolParserContract(toolParserRegistry.create(name));

describe("toolParserRegistry", () => {
  it("lists the parsers and names the known ones for an unknown name", () => {
    expect(toolParserRegistry.names()).toEqual(["arbor", "hermes", "llama3_json", "mistral"]);
    for (const name of toolParserRegistry.names()) expect(toolParserRegistry.create(name).name).toBe(name);
    expect(() => toolParserRegistry.create("pythonic")).toThrow("unknown tool-call parser 'pythonic' (known: arbor, hermes, llama3_json, mistral)");
  });
});

const call = (i: number, name: string, args: string) => ({ id: `call_t_${i}`, type: "function", function: { name, arguments: args } });

describe("the formats as the models write them", () => {
  it("hermes: Qwen's newline-separated blocks, arguments as Python's json.dumps writes them; a block without an arguments object stays text", () => {
    const hermes = toolParserRegistry.create("hermes");
    const qwen = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>';
    expect(parsePieces(hermes, qwen)).toEqual({ content: "Let me look.", calls: [call(0, "get_weather", '{"city": "Paris", "days": 2}'), call(1, "noop", "{}")] });
    const noArgs = '<tool_call>\n{"name": "noop"}\n</tool_call>';
    expect(parsePieces(hermes, noArgs)).toEqual({ content: noArgs, calls: [] });
    expect(parsePieces(hermes, '<tool_call>{"name":"noop","arguments":{}}</tool_call> done')).toEqual({ content: " done", calls: [call(0, "noop", "{}")] });
  });

  it("llama3_json: an answer that is the call, after <|python_tag|> or whitespace, several joined by ;", () => {
    const llama = toolParserRegistry.create("llama3_json");
    expect(parsePieces(llama, '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}')).toEqual({ content: "", calls: [call(0, "get_weather", '{"city": "Paris"}')] });
    expect(parsePieces(llama, '\n {"name": "noop", "arguments": {}}; {"name": "get_weather", "parameters": {}}')).toEqual({
      content: "",
      calls: [call(0, "noop", "{}"), call(1, "get_weather", "{}")],
    });
    const prose = 'Sure: {"name": "noop", "parameters": {}}';
    expect(parsePieces(llama, prose)).toEqual({ content: prose, calls: [] });
    expect(parsePieces(llama, '{"name": "noop", "parameters": {}} and that is it')).toEqual({ content: " and that is it", calls: [call(0, "noop", "{}")] });
    expect(parsePieces(llama, '{"answer": 42}')).toEqual({ content: '{"answer": 42}', calls: [] });
  });

  it("mistral: [TOOL_CALLS] with or without the template's space, after content; a marker without an array stays text", () => {
    const mistral = toolParserRegistry.create("mistral");
    // Mistral's templates require call ids of 9 alphanumerics: the parser's ids follow its own scheme.
    const call = (i: number, name: string, args: string) => ({ id: mistralCallId("call_t", i), type: "function", function: { name, arguments: args } });
    expect(call(0, "x", "{}").id).toMatch(/^[A-Za-z0-9]{9}$/);
    expect(call(0, "x", "{}").id).not.toBe(call(1, "x", "{}").id);
    expect(mistralCallId("call_t", 0)).toBe(call(0, "x", "{}").id);
    const calls = '[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "noop", "arguments": {}}]';
    for (const text of [`[TOOL_CALLS] ${calls}`, `[TOOL_CALLS]${calls}`]) {
      expect(parsePieces(mistral, text)).toEqual({ content: "", calls: [call(0, "get_weather", '{"city": "Paris"}'), call(1, "noop", "{}")] });
    }
    expect(parsePieces(mistral, `Checking.${"[TOOL_CALLS]"} ${calls}`).content).toBe("Checking.");
    expect(parsePieces(mistral, "[TOOL_CALLS] none today")).toEqual({ content: "[TOOL_CALLS] none today", calls: [] });
    expect(parsePieces(mistral, `[TOOL_CALLS] ${calls}`, [], { single: true })).toEqual({ content: ', {"name": "noop", "arguments": {}}]', calls: [call(0, "get_weather", '{"city": "Paris"}')] });
  });

  it("format writes the chat templates' own text", () => {
    const c = [{ name: "get_weather", arguments: '{"city": "Oslo"}' }];
    expect(toolParserRegistry.create("hermes").format("Hi", c)).toBe('Hi\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>');
    expect(toolParserRegistry.create("llama3_json").format("", c)).toBe('{"name": "get_weather", "parameters": {"city": "Oslo"}}');
    expect(() => toolParserRegistry.create("llama3_json").format("Hi", c)).toThrow("llama3_json: an assistant turn with tool calls has no content");
    expect(toolParserRegistry.create("mistral").format("", c)).toBe('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}]');
    expect(toolParserRegistry.create("arbor").format("Hi", c)).toBe('Hi<|tool_call|>get_weather {"city": "Oslo"}<|/tool_call|>');
    expect(toolParserRegistry.create("hermes").prefill("noop")).toBe('<tool_call>\n{"name": "noop", "arguments": ');
    expect(toolParserRegistry.create("hermes").prefill()).toBe("<tool_call>\n");
  });
});
