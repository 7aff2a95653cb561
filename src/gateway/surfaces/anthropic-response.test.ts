import { describe, expect, it } from "vitest";
import { AnthropicError } from "./anthropic-error.js";
import { chatToAnthropic } from "./anthropic-response.js";

const usage = { prompt_tokens: 12, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 8 } };

describe("chatToAnthropic", () => {
  it("puts reasoning_content first, as a thinking block", () => {
    const m = chatToAnthropic({ id: "chatcmpl-r", choices: [{ message: { content: "4", reasoning_content: "add them" }, finish_reason: "stop" }] }, "claude-x");
    expect(m.content).toEqual([
      { type: "thinking", thinking: "add them", signature: "" },
      { type: "text", text: "4" },
    ]);
  });

  it("translates a text answer", () => {
    const msg = chatToAnthropic(
      { id: "chatcmpl-abc123", choices: [{ message: { content: "Hello." }, finish_reason: "stop" }], usage },
      "claude-x",
    );
    expect(msg).toEqual({
      id: "msg_abc123",
      type: "message",
      role: "assistant",
      model: "claude-x",
      content: [{ type: "text", text: "Hello." }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 12, output_tokens: 5, cache_creation_input_tokens: null, cache_read_input_tokens: 8 },
    });
  });

  it("translates tool calls into tool_use blocks with parsed input", () => {
    const msg = chatToAnthropic(
      {
        id: "chatcmpl-1",
        choices: [
          {
            message: {
              content: "Let me look.",
              tool_calls: [
                { id: "call_9", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
                { type: "function", function: { name: "noop", arguments: "" } },
              ],
            },
            finish_reason: "tool_calls",
          },
        ],
      },
      "m",
    );
    expect(msg.content).toEqual([
      { type: "text", text: "Let me look." },
      { type: "tool_use", id: "call_9", name: "get_weather", input: { city: "Paris" } },
      { type: "tool_use", id: "toolu_1_1", name: "noop", input: {} },
    ]);
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.usage.input_tokens).toBe(0);
  });

  it("maps stop reasons", () => {
    const one = (finish_reason: string | null, stop_reason?: string | number | null) =>
      chatToAnthropic({ choices: [{ message: { content: "x" }, finish_reason, stop_reason }] }, "m");
    expect(one("length").stop_reason).toBe("max_tokens");
    expect(one("content_filter").stop_reason).toBe("refusal");
    expect(one("stop", 2).stop_reason).toBe("end_turn"); // an EOS token id, not a stop string
    const seq = one("stop", "END");
    expect([seq.stop_reason, seq.stop_sequence]).toEqual(["stop_sequence", "END"]);
    expect(() => one(null)).toThrow(AnthropicError);
  });

  it("fails with a 502 when tool arguments are not a JSON object", () => {
    const bad = { choices: [{ message: { tool_calls: [{ id: "c", function: { name: "t", arguments: "{oops" } }] }, finish_reason: "tool_calls" }] };
    try {
      chatToAnthropic(bad, "m");
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(AnthropicError);
      expect((e as AnthropicError).status).toBe(502);
      expect((e as AnthropicError).message).toMatch(/choices\.0\.message\.tool_calls\.0\.function: arguments are not valid JSON/);
    }
    expect(() => chatToAnthropic({ choices: [] }, "m")).toThrow(/choices is empty/);
  });
});
