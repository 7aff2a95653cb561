import { describe, expect, it } from "vitest";
import { AnthropicError } from "./anthropic-error.js";
import { anthropicErrorEvent, ChatChunkToAnthropicEvents, formatAnthropicSse, type ChatChunkLike } from "./anthropic-stream.js";

function convert(chunks: ChatChunkLike[]) {
  const c = new ChatChunkToAnthropicEvents("claude-x", 7);
  return [...chunks.flatMap((ch) => c.push(ch)), ...c.finish()];
}

describe("ChatChunkToAnthropicEvents", () => {
  it("streams reasoning_content as a thinking block (thinking_delta, then an empty signature) before the text", () => {
    const events = convert([
      { id: "chatcmpl-t1", choices: [{ delta: { reasoning_content: "add ", content: "" } }] },
      { choices: [{ delta: { reasoning_content: "them" } }] },
      { choices: [{ delta: { content: "4" }, finish_reason: "stop" }] },
    ]);
    expect(events.slice(1, 8)).toEqual([
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "add " } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "them" } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "4" } },
    ]);
  });

  it("streams text then a tool call in Anthropic's event order", () => {
    const events = convert([
      { id: "chatcmpl-s1", choices: [{ delta: { content: "Hel" } }] },
      { id: "chatcmpl-s1", choices: [{ delta: { content: "lo" } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, id: "call_1", function: { name: "get_weather", arguments: '{"ci' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] } }] },
      { choices: [{ delta: {}, finish_reason: "tool_calls" }] },
      { choices: [], usage: { prompt_tokens: 12, completion_tokens: 9 } },
    ]);
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(events[0]).toMatchObject({ message: { id: "msg_s1", model: "claude-x", content: [], usage: { input_tokens: 7, output_tokens: 0 } } });
    expect(events[1]).toEqual({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
    expect(events[3]).toEqual({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "lo" } });
    expect(events[5]).toEqual({ type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "call_1", name: "get_weather", input: {} } });
    expect(events[7]).toEqual({ type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: 'ty":"Paris"}' } });
    expect(events[9]).toEqual({
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { output_tokens: 9, input_tokens: 12, cache_read_input_tokens: null },
    });
  });

  it("reports stop sequences and max_tokens, and handles an empty answer", () => {
    const seq = convert([{ choices: [{ delta: { content: "a" }, finish_reason: "stop", stop_reason: "END" }] }]);
    expect(seq.at(-2)).toMatchObject({ delta: { stop_reason: "stop_sequence", stop_sequence: "END" } });
    const len = convert([{ choices: [{ delta: { content: "a" }, finish_reason: "length" }] }]);
    expect(len.at(-2)).toMatchObject({ delta: { stop_reason: "max_tokens" } });
    const empty = convert([{ choices: [{ delta: {}, finish_reason: "stop" }] }]);
    expect(empty.map((e) => e.type)).toEqual(["message_start", "message_delta", "message_stop"]);
  });

  it("rejects a cut-off stream and interleaved tool calls", () => {
    const cut = new ChatChunkToAnthropicEvents("m");
    cut.push({ choices: [{ delta: { content: "a" } }] });
    expect(() => cut.finish()).toThrow(AnthropicError);
    const inter = new ChatChunkToAnthropicEvents("m");
    inter.push({ choices: [{ delta: { tool_calls: [{ index: 0, id: "a", function: { name: "t", arguments: "{" } }] } }] });
    inter.push({ choices: [{ delta: { tool_calls: [{ index: 1, id: "b", function: { name: "t", arguments: "{}" } }] } }] });
    expect(() => inter.push({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: "}" } }] } }] })).toThrow(/continued after/);
  });

  it("formats SSE frames and error events", () => {
    expect(formatAnthropicSse({ type: "message_stop" })).toBe('event: message_stop\ndata: {"type":"message_stop"}\n\n');
    expect(anthropicErrorEvent(AnthropicError.upstream("x"))).toEqual({
      type: "error",
      error: { type: "api_error", message: "upstream answer cannot be translated: x" },
    });
  });
});
