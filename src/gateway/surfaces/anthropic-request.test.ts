import { describe, expect, it } from "vitest";
import { AnthropicError } from "./anthropic-error.js";
import { anthropicToChat } from "./anthropic-request.js";

function errorOf(body: unknown): AnthropicError {
  try {
    anthropicToChat(body);
  } catch (e) {
    if (e instanceof AnthropicError) return e;
    throw e;
  }
  throw new Error("expected an AnthropicError");
}

describe("anthropicToChat", () => {
  it("keeps an assistant turn's thinking blocks as its reasoning_content; refuses them in user turns", () => {
    const chat = anthropicToChat({
      model: "m",
      max_tokens: 10,
      messages: [
        { role: "user", content: "2+2?" },
        { role: "assistant", content: [{ type: "thinking", thinking: "add", signature: "" }, { type: "text", text: "4" }] },
        { role: "user", content: "ok" },
      ],
    });
    expect(chat.messages[1]).toEqual({ role: "assistant", content: "4", reasoning_content: "add" });
    expect(() => anthropicToChat({ model: "m", max_tokens: 10, messages: [{ role: "user", content: [{ type: "thinking", thinking: "x" }] }] })).toThrow(
      "messages.0.content.0.type: thinking blocks belong in assistant messages",
    );
  });

  it("translates a text request with sampling options and system blocks", () => {
    const body = anthropicToChat({
      model: "m",
      max_tokens: 64,
      system: [{ type: "text", text: "You are terse." }, { type: "text", text: "Answer in French.", cache_control: { type: "ephemeral" } }],
      messages: [{ role: "user", content: "hi" }],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 20,
      stop_sequences: ["END"],
      metadata: { user_id: "u1" },
      stream: true,
    });
    expect(body).toEqual({
      model: "m",
      max_tokens: 64,
      messages: [
        { role: "system", content: "You are terse.\nAnswer in French." },
        { role: "user", content: "hi" },
      ],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 20,
      stop: ["END"],
      user: "u1",
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it("translates a tool-use round trip: tools, tool_use, tool_result, tool_choice", () => {
    const body = anthropicToChat({
      model: "m",
      max_tokens: 100,
      system: "sys",
      tools: [{ name: "get_weather", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      messages: [
        { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "18C" }] },
            { type: "text", text: "and tomorrow?" },
          ],
        },
      ],
    });
    expect(body.messages).toEqual([
      { role: "system", content: "sys" },
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "18C" },
      { role: "user", content: "and tomorrow?" },
    ]);
    expect(body.tools).toEqual([
      { type: "function", function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
    ]);
    expect(body.tool_choice).toBe("required");
    expect(body.parallel_tool_calls).toBe(false);
  });

  it("maps each tool_choice and marks tool errors", () => {
    const base = { model: "m", max_tokens: 1, tools: [{ name: "t", input_schema: { type: "object" } }], messages: [{ role: "user", content: "x" }] };
    expect(anthropicToChat({ ...base, tool_choice: { type: "auto" } }).tool_choice).toBe("auto");
    expect(anthropicToChat({ ...base, tool_choice: { type: "none" } }).tool_choice).toBe("none");
    expect(anthropicToChat({ ...base, tool_choice: { type: "tool", name: "t" } }).tool_choice).toEqual({ type: "function", function: { name: "t" } });
    const withError = anthropicToChat({
      ...base,
      messages: [
        { role: "assistant", content: [{ type: "tool_use", id: "a", name: "t", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "a", content: "boom", is_error: true }] },
      ],
    });
    expect(withError.messages).toEqual([
      { role: "assistant", content: null, tool_calls: [{ id: "a", type: "function", function: { name: "t", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "a", content: "[tool error] boom" },
    ]);
  });

  it("rejects bad requests in Anthropic's error shape, naming the field", () => {
    const missing = errorOf({ model: "m", messages: [{ role: "user", content: "x" }] });
    expect(missing.status).toBe(400);
    expect(missing.body.type).toBe("error");
    expect(missing.body.error.type).toBe("invalid_request_error");
    expect(missing.body.error.message).toMatch(/^max_tokens: /);

    expect(errorOf({ model: "m", max_tokens: 5, messages: [] }).message).toMatch(/^messages: /);
    expect(errorOf({ model: "m", max_tokens: 5, temperature: 2, messages: [{ role: "user", content: "x" }] }).message).toMatch(/^temperature: /);
    expect(errorOf({ model: "m", max_tokens: 5, messages: [{ role: "user", content: [{ type: "text" }] }] }).message).toMatch(
      /^messages\.0\.content\.0\.text: /,
    );
    expect(
      errorOf({ model: "m", max_tokens: 5, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }).message,
    ).toMatch(/^messages\.0\.content\.0\.type: content block type 'image' is not supported/);
    expect(
      errorOf({ model: "m", max_tokens: 5, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "nope", content: "r" }] }] }).message,
    ).toMatch(/^messages\.0\.content\.0\.tool_use_id: 'nope' matches no tool_use/);
    expect(
      errorOf({ model: "m", max_tokens: 5, tool_choice: { type: "tool", name: "x" }, messages: [{ role: "user", content: "x" }] }).message,
    ).toMatch(/^tool_choice\.name: /);
    expect(errorOf([1, 2]).message).toBe("request body must be a JSON object");
  });
});
