import { describe, expect, it } from "vitest";
import { AnthropicError } from "./anthropic-error.js";
import { anthropicToChat, translateAnthropic } from "./anthropic-request.js";

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

  it("passes Arbor's program_id on (as chat and Responses take it); refuses one that is not a string", () => {
    const chat = anthropicToChat({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }], program_id: "p1" });
    expect(chat.program_id).toBe("p1");
    expect(anthropicToChat({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }], program_id: null })).not.toHaveProperty("program_id");
    expect(errorOf({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }], program_id: 7 }).message).toMatch(/^program_id: /);
  });

  it("says which of the request's fields each chat message came from, so errors can name it", () => {
    const { chat, messageFields } = translateAnthropic({
      model: "m",
      max_tokens: 5,
      system: "Be brief.",
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: [{ type: "tool_use", id: "a", name: "t", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "a", content: "r" }, { type: "text", text: "and?" }] },
      ],
    });
    expect(chat.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "user"]);
    expect(messageFields).toEqual(["system", "messages.0.content", "messages.1.content", "messages.2.content.0.content", "messages.2.content"]);
    expect(translateAnthropic({ model: "m", max_tokens: 5, system: "", messages: [{ role: "user", content: "x" }] }).messageFields).toEqual(["messages.0.content"]);
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

  // What coding-agent CLIs send: each field is served or refused naming it, never dropped.
  describe("fields real CLIs send", () => {
    const base = { model: "claude-sonnet-4-5", max_tokens: 4096, messages: [{ role: "user", content: "x" }] };

    it("system as blocks with cache_control: served, joined in order (the engine's prefix cache does the caching)", () => {
      const body = anthropicToChat({
        ...base,
        system: [
          { type: "text", text: "You are a coding agent.", cache_control: { type: "ephemeral" } },
          { type: "text", text: "Be brief.", cache_control: { type: "ephemeral", ttl: "1h" } },
        ],
      });
      expect(body.messages[0]).toEqual({ role: "system", content: "You are a coding agent.\nBe brief." });
    });

    it("thinking: served (enabled with a budget below max_tokens, adaptive, disabled); refused otherwise, naming the field", () => {
      for (const thinking of [{ type: "enabled", budget_tokens: 1024 }, { type: "adaptive" }, { type: "disabled" }]) {
        expect(() => anthropicToChat({ ...base, thinking })).not.toThrow();
      }
      expect(errorOf({ ...base, thinking: { type: "enabled", budget_tokens: 4096 } }).message).toMatch(/^thinking\.budget_tokens: must be less than max_tokens \(4096\)/);
      expect(errorOf({ ...base, thinking: { type: "enabled", budget_tokens: 100 } }).message).toMatch(/^thinking\.budget_tokens: /);
      expect(errorOf({ ...base, thinking: { type: "enabled" } }).message).toMatch(/^thinking\.budget_tokens: /);
      expect(errorOf({ ...base, thinking: { type: "always" } }).message).toMatch(/^thinking\.type: /);
    });

    it("thinking and redacted_thinking blocks in history: thinking kept as the turn's reasoning, redacted refused", () => {
      const history = [
        { role: "user", content: "x" },
        { role: "assistant", content: [{ type: "thinking", thinking: "hmm", signature: "sig" }, { type: "text", text: "y" }] },
        { role: "user", content: "z" },
      ];
      expect(anthropicToChat({ ...base, messages: history }).messages[1]).toEqual({ role: "assistant", content: "y", reasoning_content: "hmm" });
      const redacted = [history[0], { role: "assistant", content: [{ type: "redacted_thinking", data: "…" }] }, history[2]];
      expect(errorOf({ ...base, messages: redacted }).message).toMatch(/^messages\.1\.content\.0\.type: content block type 'redacted_thinking' is not supported/);
    });

    it("tool_result with array content and is_error: served (text joined, the error marked); other parts refused", () => {
      const messages = [
        { role: "user", content: "x" },
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "bash", input: { cmd: "ls" } }] },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "t1", is_error: true, content: [{ type: "text", text: "no such" }, { type: "text", text: "file" }], cache_control: { type: "ephemeral" } }],
        },
      ];
      const tools = [{ name: "bash", input_schema: { type: "object" } }];
      expect(anthropicToChat({ ...base, tools, messages }).messages[2]).toEqual({ role: "tool", tool_call_id: "t1", content: "[tool error] no such\nfile" });
      const image = structuredClone(messages);
      (image[2]!.content as { content: unknown[] }[])[0]!.content = [{ type: "image", source: { type: "base64", media_type: "image/png", data: "" } }];
      expect(errorOf({ ...base, tools, messages: image }).message).toMatch(/^messages\.2\.content\.0\.content/);
    });

    it("stop_sequences, metadata.user_id, service_tier and every tool_choice: served; other metadata keys refused", () => {
      const tools = [{ name: "bash", input_schema: { type: "object" } }];
      const body = anthropicToChat({ ...base, stop_sequences: ["</done>"], metadata: { user_id: "u1" }, service_tier: "auto" });
      expect(body).toMatchObject({ stop: ["</done>"], user: "u1" });
      const choices: [unknown, unknown][] = [
        [{ type: "auto" }, "auto"],
        [{ type: "any" }, "required"],
        [{ type: "none" }, "none"],
        [{ type: "tool", name: "bash" }, { type: "function", function: { name: "bash" } }],
      ];
      for (const [choice, chat] of choices) expect(anthropicToChat({ ...base, tools, tool_choice: choice }).tool_choice).toEqual(chat);
      expect(anthropicToChat({ ...base, tools, tool_choice: { type: "any", disable_parallel_tool_use: true } }).parallel_tool_calls).toBe(false);
      expect(errorOf({ ...base, metadata: { user_id: "u1", session: "s" } }).message).toMatch(/^metadata\.session: is not supported by this gateway/);
      expect(errorOf({ ...base, service_tier: "priority" }).message).toMatch(/^service_tier: /);
    });

    it("refuses top-level fields, block keys and server tools it does not serve, naming each", () => {
      expect(errorOf({ ...base, mcp_servers: [] }).message).toMatch(/^mcp_servers: is not supported by this gateway \(supported: model, /);
      expect(errorOf({ ...base, context_management: { edits: [] } }).message).toMatch(/^context_management: is not supported/);
      expect(errorOf({ ...base, container: "c" }).message).toMatch(/^container: is not supported/);
      expect(errorOf({ ...base, messages: [{ role: "user", content: [{ type: "text", text: "x", citations: [] }] }] }).message).toMatch(
        /^messages\.0\.content\.0\.citations: is not supported by this gateway/,
      );
      expect(errorOf({ ...base, tools: [{ type: "web_search_20250305", name: "web_search" }] }).message).toMatch(/^tools\.0\.type: server tool "web_search_20250305" is not supported/);
      expect(errorOf({ ...base, tools: [{ name: "f", input_schema: { type: "object" }, strict: true }] }).message).toMatch(/^tools\.0\.strict: is not supported/);
      // A client tool may say it is one.
      expect(anthropicToChat({ ...base, tools: [{ type: "custom", name: "f", input_schema: { type: "object" } }] }).tools).toHaveLength(1);
    });
  });
});
