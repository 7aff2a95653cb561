import { describe, expect, it } from "vitest";
import { CallTimeoutError, InvalidRequestError } from "../http-errors.js";
import { AnthropicError } from "./anthropic-error.js";
import { anthropicStreamSurface, toAnthropicError } from "./anthropic-stream-surface.js";
import { openAiStreamSurface, UpstreamStreamError } from "./stream-surface.js";

const events = (frames: string): { event: string; data: Record<string, unknown> }[] =>
  frames
    .split("\n\n")
    .filter((f) => f !== "")
    .map((f) => {
      const [event, data] = f.split("\n") as [string, string];
      return { event: event.slice("event: ".length), data: JSON.parse(data.slice("data: ".length)) };
    });

describe("anthropicStreamSurface", () => {
  it("announces the engine's prompt size, pings after message_start, and closes the message", () => {
    const s = anthropicStreamSurface("claude-x");
    const first = events(s.chunk({ id: "chatcmpl-q", choices: [{ delta: { role: "assistant", content: "" } }] }, { prompt_token_ids: [1, 2, 3] }));
    expect(first.map((e) => e.event)).toEqual(["message_start", "ping"]);
    expect(first[0]?.data).toMatchObject({ message: { id: "msg_q", model: "claude-x", usage: { input_tokens: 3 } } });
    expect(events(s.chunk({ choices: [{ delta: { content: "ok" }, finish_reason: "stop" }] }, {})).map((e) => e.event)).toEqual(["content_block_start", "content_block_delta"]);
    expect(events(s.finish()).map((e) => e.event)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
  });

  it("answers failures in Anthropic's shapes", () => {
    const s = anthropicStreamSurface("m");
    expect(s.errorResponse(new InvalidRequestError("max_tokens", "too many"))).toEqual({
      status: 400,
      body: { type: "error", error: { type: "invalid_request_error", message: "max_tokens: too many" } },
    });
    expect(events(s.fail(new UpstreamStreamError("{}", { error: { message: "boom" } })))).toEqual([
      { event: "error", data: { type: "error", error: { type: "api_error", message: "upstream engine failed mid-stream: boom" } } },
    ]);
    expect(s.upstreamErrorBody(429, { error: { message: "queue full" } })).toEqual({ type: "error", error: { type: "rate_limit_error", message: "queue full" } });
    expect(toAnthropicError(new CallTimeoutError("e0", 5)).status).toBe(504);
    const own = AnthropicError.invalidRequest("x", "y");
    expect(toAnthropicError(own)).toBe(own);
  });
});

describe("openAiStreamSurface", () => {
  it("relays chunks as data frames and passes an engine's error event on as is", () => {
    const s = openAiStreamSurface();
    expect(s.chunk({ a: 1 }, { a: 1, token_ids: [4] })).toBe('data: {"a":1}\n\n');
    expect(s.finish()).toBe("data: [DONE]\n\n");
    expect(s.upstreamErrorBody(400, { error: { message: "x" } })).toEqual({ error: { message: "x" } });
    expect(s.fail(new UpstreamStreamError('{"error":{"message":"x"}}', { error: { message: "x" } }))).toBe('data: {"error":{"message":"x"}}\n\ndata: [DONE]\n\n');
    expect(s.fail(new InvalidRequestError("n", "bad"))).toMatch(/^data: \{"error":\{.*"code":400\}\}\n\ndata: \[DONE\]\n\n$/);
  });
});
