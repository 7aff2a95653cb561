import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../http-errors.js";
import { responsesToChat } from "./responses-request.js";

function rejection(raw: unknown): InvalidRequestError {
  try {
    responsesToChat(raw);
  } catch (e) {
    if (e instanceof InvalidRequestError) return e;
    throw e;
  }
  throw new Error("expected a rejection");
}

describe("responsesToChat", () => {
  it("turns a string input with instructions into system + user messages", () => {
    const { chat, echo } = responsesToChat({ model: "m", input: "hi", instructions: "Be brief.", max_output_tokens: 16, temperature: 0.5, top_p: 0.9 });
    expect(chat).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
      ],
      max_tokens: 16,
      temperature: 0.5,
      top_p: 0.9,
    });
    expect(echo).toMatchObject({ model: "m", instructions: "Be brief.", max_output_tokens: 16, tool_choice: "auto", tools: [] });
  });

  it("translates a tool-using conversation as the Agents SDK sends it", () => {
    const { chat } = responsesToChat({
      model: "m",
      input: [
        { role: "user", content: "Weather in Paris?" },
        { type: "message", role: "assistant", id: "msg_1", status: "completed", content: [{ type: "output_text", text: "Checking.", annotations: [] }] },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "weather", arguments: '{"city":"Paris"}', status: "completed" },
        { type: "function_call", call_id: "call_2", name: "time", arguments: "{}" },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "noon" }] },
        { role: "developer", content: [{ type: "input_text", text: "Answer now." }] },
      ],
      tools: [{ type: "function", name: "weather", description: "w", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: true }, { type: "function", name: "time", parameters: null }],
      tool_choice: { type: "function", name: "weather" },
      parallel_tool_calls: false,
    });
    expect(chat.messages).toEqual([
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "call_2", type: "function", function: { name: "time", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
      { role: "tool", tool_call_id: "call_2", content: "noon" },
      { role: "system", content: "Answer now." },
    ]);
    expect(chat.tools).toEqual([
      { type: "function", function: { name: "weather", description: "w", parameters: { type: "object", properties: { city: { type: "string" } } } } },
      { type: "function", function: { name: "time", parameters: { type: "object", properties: {} } } },
    ]);
    expect(chat.tool_choice).toEqual({ type: "function", function: { name: "weather" } });
    expect(chat.parallel_tool_calls).toBe(false);
  });

  it("keeps stream and program_id for the gateway to act on", () => {
    const { chat } = responsesToChat({ model: "m", input: "x", stream: true, program_id: "p1" });
    expect(chat.stream).toBe(true);
    expect(chat.stream_options).toEqual({ include_usage: true });
    expect(chat.program_id).toBe("p1");
  });

  it("rejects bad input naming the field", () => {
    expect(rejection([]).message).toMatch(/JSON object/);
    expect(rejection({ input: "x" }).param).toBe("model");
    expect(rejection({ model: "m" }).param).toBe("input");
    expect(rejection({ model: "m", input: [] }).param).toBe("input");
    expect(rejection({ model: "m", input: "x", max_output_tokens: 0 }).param).toBe("max_output_tokens");
    expect(rejection({ model: "m", input: "x", temperature: 3 }).param).toBe("temperature");
    expect(rejection({ model: "m", input: [{ role: "user", content: 5 }] }).param).toMatch(/^input\.0\.content/);
    expect(rejection({ model: "m", input: [{ type: "function_call", call_id: "c", name: "f" }] }).param).toBe("input.0.arguments");
    expect(rejection({ model: "m", input: [{ type: "function_call_output", call_id: "nope", output: "x" }] }).param).toBe("input.0.call_id");
    expect(rejection({ model: "m", input: "x", previous_response_id: "resp_1" }).param).toBe("previous_response_id");
    expect(rejection({ model: "m", input: "x", tools: [{ type: "function", name: "f" }], tool_choice: { type: "function", name: "g" } }).param).toBe("tool_choice.name");
    expect(rejection({ model: "m", input: "x", tools: [{ type: "function" }] }).param).toBe("tools.0.name");
  });

  it("rejects unsupported item, part and tool types clearly", () => {
    const item = rejection({ model: "m", input: [{ type: "web_search_call", id: "ws_1" }] });
    expect(item.param).toBe("input.0.type");
    expect(item.message).toMatch(/'?"web_search_call"'? is not supported.*message, function_call, function_call_output, reasoning/);
    const part = rejection({ model: "m", input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] });
    expect(part.param).toBe("input.0.content.0.type");
    expect(part.message).toMatch(/input_image/);
    const tool = rejection({ model: "m", input: "x", tools: [{ type: "web_search" }] });
    expect(tool.param).toBe("tools.0.type");
    expect(tool.message).toMatch(/web_search.*supported: function/);
  });

  // What Responses clients (the Agents SDK, coding-agent CLIs) send: each field served, accepted
  // without effect on the answer, or refused naming it — never dropped.
  it("accepts the fields without effect on the answer, and what the gateway does anyway", () => {
    const { chat } = responsesToChat({
      model: "m",
      input: "x",
      store: false,
      metadata: { run: "r1" },
      prompt_cache_key: "k",
      prompt_cache_retention: "24h",
      safety_identifier: "s",
      service_tier: "auto",
      include: [],
      text: { format: { type: "text" } },
      truncation: "disabled",
      background: false,
      reasoning: null,
      user: "u",
    });
    expect(chat).toEqual({ model: "m", messages: [{ role: "user", content: "x" }], user: "u" });
  });

  it("keeps metadata for the Response to echo, refusing what OpenAI refuses (16 keys of 64 characters, values of 512)", () => {
    expect(responsesToChat({ model: "m", input: "x", metadata: { run: "r1" } }).echo.metadata).toEqual({ run: "r1" });
    expect(responsesToChat({ model: "m", input: "x", metadata: null }).echo.metadata).toEqual({});
    expect(responsesToChat({ model: "m", input: "x" }).echo.metadata).toEqual({});
    const most = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`.padEnd(64, "k"), "v".repeat(512)]));
    expect(responsesToChat({ model: "m", input: "x", metadata: most }).echo.metadata).toEqual(most);
    const refused: [unknown, string, RegExp][] = [
      [{ ...most, extra: "v" }, "metadata", /at most 16 keys, got 17/],
      [{ ["k".repeat(65)]: "v" }, "metadata", /keys must be at most 64 characters, got 65/],
      [{ run: "v".repeat(513) }, "metadata.run", /at most 512 characters, got 513/],
      [{ run: 42 }, "metadata.run", /string/],
      ["run", "metadata", /.+/],
    ];
    for (const [metadata, param, message] of refused) {
      const e = rejection({ model: "m", input: "x", metadata });
      expect(e.param, param).toBe(param);
      expect(e.message, param).toMatch(message);
    }
  });

  it("says which of the request's fields each chat message came from, so errors can name it", () => {
    expect(responsesToChat({ model: "m", instructions: "Be brief.", input: "x" }).messageFields).toEqual(["instructions", "input"]);
    const { chat, messageFields } = responsesToChat({
      model: "m",
      input: [
        { role: "user", content: "hi" },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call", call_id: "c2", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "r1" },
        { type: "function_call_output", call_id: "c2", output: "r2" },
        { role: "assistant", content: "done" },
      ],
    });
    expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(messageFields).toEqual(["input.0.content", "input.1", "input.3.output", "input.4.output", "input.5.content"]);
  });

  it("refuses what it does not serve, naming the field", () => {
    const base = { model: "m", input: "x" };
    const refused: [Record<string, unknown>, string][] = [
      [{ reasoning: { effort: "high" } }, "reasoning.effort"],
      [{ reasoning: { summary: "auto" } }, "reasoning.summary"],
      [{ include: ["reasoning.encrypted_content"] }, "include"],
      [{ text: { format: { type: "json_schema", name: "x", schema: {} } } }, "text.format.type"],
      [{ text: { verbosity: "low" } }, "text.verbosity"],
      [{ truncation: "auto" }, "truncation"],
      [{ background: true }, "background"],
      [{ conversation: "conv_1" }, "conversation"],
      [{ max_tool_calls: 3 }, "max_tool_calls"],
      [{ top_logprobs: 2 }, "top_logprobs"],
      [{ prompt: { id: "p" } }, "prompt"],
    ];
    for (const [extra, param] of refused) {
      const e = rejection({ ...base, ...extra });
      expect(e.param, param).toBe(param);
      expect(e.message, param).toMatch(new RegExp(`^${param.replace(/\./g, "\\.")}: `));
    }
    expect(rejection({ ...base, conversation: "c" }).message).toMatch(/is not supported by this gateway \(supported: model, input, /);
  });
});

describe("responsesToChat reasoning items", () => {
  const reasoning = { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "Let me see." }] };

  it("gives a reasoning item sent back to the assistant turn after it, as its reasoning_content", () => {
    const { chat } = responsesToChat({
      model: "m",
      input: [{ role: "user", content: "hi" }, reasoning, { type: "message", role: "assistant", content: [{ type: "output_text", text: "The answer." }] }, { role: "user", content: "more" }],
    });
    expect(chat.messages).toEqual([
      { role: "user", content: "hi" },
      { role: "assistant", content: "The answer.", reasoning_content: "Let me see." },
      { role: "user", content: "more" },
    ]);
    const calls = responsesToChat({ model: "m", input: [{ role: "user", content: "hi" }, reasoning, { type: "function_call", call_id: "c1", name: "f", arguments: "{}" }] });
    expect(calls.chat.messages[1]).toMatchObject({ role: "assistant", content: null, reasoning_content: "Let me see.", tool_calls: [{ id: "c1" }] });
  });

  it("refuses a reasoning item no assistant turn follows, a summary, or encrypted content, naming the item", () => {
    expect(() => responsesToChat({ model: "m", input: [reasoning, { role: "user", content: "hi" }] })).toThrow(expect.objectContaining({ param: "input.0" }));
    expect(() => responsesToChat({ model: "m", input: [{ role: "user", content: "hi" }, { ...reasoning, summary: [{ type: "summary_text", text: "s" }] }] })).toThrow(
      expect.objectContaining({ param: "input.1.summary" }),
    );
    expect(() => responsesToChat({ model: "m", input: [{ role: "user", content: "hi" }, { ...reasoning, encrypted_content: "x" }] })).toThrow(expect.objectContaining({ param: "input.1.encrypted_content" }));
  });
});
