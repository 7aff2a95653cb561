import { describe, expect, it } from "vitest";
import { z } from "../core/zod.js";
import type { Tool } from "./tool.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { defineTool, fromEnvTool, parseToolInput, toolParameters } from "./agent-tool.js";
import { nativeToolSpecs, parseAnswer } from "./tool-modes.js";
import { toOpenAiMessages } from "./agent-message.js";

const search = defineTool({
  name: "search",
  description: "search the corpus",
  input: z.object({ query: z.string().min(1), k: z.number().int().positive().optional() }),
  run: async ({ query }) => query,
});
const shell = defineTool({ name: "shell", description: "run", input: z.string(), run: async (s) => s });
const noSandbox = {} as Sandbox;
const ctx = { sandbox: noSandbox, programId: "p", callIndex: 0, signal: new AbortController().signal };

describe("agent tools", () => {
  it("declare JSON Schema parameters; non-object inputs travel wrapped as {input}", () => {
    expect(toolParameters(search)).toEqual({
      wrapped: false,
      parameters: { type: "object", properties: { query: { type: "string", minLength: 1 }, k: { type: "integer", exclusiveMinimum: 0, maximum: Number.MAX_SAFE_INTEGER } }, required: ["query"], additionalProperties: false },
    });
    expect(toolParameters(shell)).toEqual({
      wrapped: true,
      parameters: { type: "object", properties: { input: { type: "string" } }, required: ["input"], additionalProperties: false },
    });
    expect(nativeToolSpecs([shell])[0]).toEqual({ type: "function", function: { name: "shell", description: "run", parameters: toolParameters(shell).parameters } });
  });

  it("validate native JSON arguments and markup text against the schema", () => {
    expect(parseToolInput(search, '{"query":"bridge","k":3}', true)).toEqual({ ok: true, value: { query: "bridge", k: 3 } });
    expect(parseToolInput(search, '{"query":""}', true)).toEqual({ ok: false, error: expect.stringMatching(/^query: /) });
    expect(parseToolInput(search, "{nope", true)).toEqual({ ok: false, error: expect.stringMatching(/^arguments are not JSON/) });
    expect(parseToolInput(search, '{"query":"x"}', false)).toEqual({ ok: true, value: { query: "x" } });
    expect(parseToolInput(shell, '{"input":"ls -l"}', true)).toEqual({ ok: true, value: "ls -l" });
    // Markup: the text is the input of a string tool, JSON or not.
    expect(parseToolInput(shell, "12*7+3", false)).toEqual({ ok: true, value: "12*7+3" });
    expect(parseToolInput(shell, '{"a":1}', false)).toEqual({ ok: true, value: '{"a":1}' });
  });

  it("adapt environment tools, turning a crash that reports OOM into an oom result", async () => {
    const results = [
      { ok: true, output: "87" },
      { ok: false, crashed: true, output: "bc was killed by SIGSEGV" },
      { ok: false, crashed: true, output: "bc: Cannot allocate memory" },
    ];
    const env: Tool = { name: "calc", description: "d", run: async () => results.shift()! };
    const t = fromEnvTool(env);
    expect(toolParameters(t).wrapped).toBe(true);
    expect(await t.run("1+1", ctx)).toEqual({ ok: true, output: "87" });
    expect(await t.run("1+1", ctx)).toEqual({ ok: false, crashed: true, output: "bc was killed by SIGSEGV" });
    expect(await t.run("1+1", ctx)).toEqual({ ok: false, crashed: true, oom: true, output: "bc: Cannot allocate memory" });
  });
});

describe("tool-call modes", () => {
  it("native: tool_calls become calls; markup: calls are parsed from the text", () => {
    const native = parseAnswer("native", { content: null, tool_calls: [{ id: "x1", type: "function", function: { name: "search", arguments: '{"query":"a"}' } }] }, 3);
    expect(native.calls).toEqual([{ id: "x1", name: "search", input: '{"query":"a"}' }]);
    expect(native.assistant).toEqual({ role: "assistant", content: "", toolCalls: [{ id: "x1", name: "search", arguments: '{"query":"a"}' }] });
    const markup = parseAnswer("markup", { content: "Let me see <|tool_call|>calc 1+2<|/tool_call|>" }, 3);
    expect(markup.calls).toEqual([{ id: "call_3_0", name: "calc", input: "1+2" }]);
    expect(markup.text).toBe("Let me see");
    expect(markup.assistant.content).toBe("Let me see <|tool_call|>calc 1+2<|/tool_call|>");
  });

  it("send native calls and their results in OpenAI form", () => {
    expect(
      toOpenAiMessages([
        { role: "assistant", content: "", toolCalls: [{ id: "x1", name: "search", arguments: "{}" }] },
        { role: "tool", name: "search", content: "r", toolCallId: "x1" },
        { role: "tool", content: "legacy" },
      ]),
    ).toEqual([
      { role: "assistant", content: null, tool_calls: [{ id: "x1", type: "function", function: { name: "search", arguments: "{}" } }] },
      { role: "tool", content: "r", tool_call_id: "x1" },
      { role: "tool", content: "legacy", tool_call_id: "call_2" },
    ]);
  });
});
