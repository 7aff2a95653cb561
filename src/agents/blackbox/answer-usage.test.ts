import { describe, expect, it } from "vitest";
import { AnswerUsageReader, type AnswerUsage } from "./answer-usage.js";

/** Feed `body` in pieces of `step` bytes (splitting lines, events and characters), then finish. */
function read(contentType: string, body: string, step = 7, maxEventBytes?: number): AnswerUsage {
  const r = new AnswerUsageReader(contentType, maxEventBytes === undefined ? {} : { maxEventBytes });
  const bytes = Buffer.from(body, "utf8");
  for (let i = 0; i < bytes.length; i += step) r.push(bytes.subarray(i, i + step));
  return r.finish();
}

const sse = (...events: unknown[]): string => events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");

describe("AnswerUsageReader", () => {
  it("reads usage from JSON answers of each surface", () => {
    expect(read("application/json", JSON.stringify({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 12 } }))).toEqual({ counted: true, tokens: 12 });
    expect(read("application/json; charset=utf-8", JSON.stringify({ type: "message", usage: { input_tokens: 9, output_tokens: 5 } }))).toEqual({ counted: true, tokens: 5 });
    expect(read("application/json", JSON.stringify({ object: "response", usage: { output_tokens: 0 } }))).toEqual({ counted: true, tokens: 0 });
  });

  it("reads the closing usage chunk of an OpenAI chat stream, split anywhere", () => {
    const body = sse(
      { choices: [{ index: 0, delta: { role: "assistant", content: "héllo ✓" } }] },
      { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
      { choices: [], usage: { prompt_tokens: 40, completion_tokens: 17, total_tokens: 57 } },
      "[DONE]",
    );
    for (const step of [1, 2, 5, 64, body.length]) expect(read("text/event-stream", body, step)).toEqual({ counted: true, tokens: 17 });
    // CRLF line ends are SSE too.
    expect(read("text/event-stream", body.replaceAll("\n", "\r\n"))).toEqual({ counted: true, tokens: 17 });
  });

  it("reads an Anthropic stream's cumulative message_delta usage, not message_start's", () => {
    const body = [
      `event: message_start\ndata: ${JSON.stringify({ type: "message_start", message: { id: "m", usage: { input_tokens: 30, output_tokens: 1 } } })}\n\n`,
      `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "hi" } })}\n\n`,
      `event: message_delta\ndata: ${JSON.stringify({ type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 23, input_tokens: null } })}\n\n`,
      `event: message_stop\ndata: ${JSON.stringify({ type: "message_stop" })}\n\n`,
    ].join("");
    expect(read("text/event-stream; charset=utf-8", body, 3)).toEqual({ counted: true, tokens: 23 });
  });

  it("reads a Responses stream's usage from response.completed (in_progress carries none)", () => {
    const body = [
      `event: response.created\ndata: ${JSON.stringify({ type: "response.created", response: { status: "in_progress", usage: null } })}\n\n`,
      `event: response.output_text.delta\ndata: ${JSON.stringify({ type: "response.output_text.delta", delta: "x" })}\n\n`,
      `event: response.completed\ndata: ${JSON.stringify({ type: "response.completed", response: { status: "completed", usage: { input_tokens: 8, output_tokens: 31 } } })}\n\n`,
    ].join("");
    expect(read("text/event-stream", body, 11)).toEqual({ counted: true, tokens: 31 });
  });

  it("reads the last event even when the stream ends without a blank line", () => {
    expect(read("text/event-stream", `data: ${JSON.stringify({ choices: [], usage: { completion_tokens: 4 } })}`)).toEqual({ counted: true, tokens: 4 });
  });

  it("says why when no usage could be read", () => {
    // A chat stream without stream_options.include_usage.
    expect(read("text/event-stream", sse({ choices: [{ delta: { content: "a" }, finish_reason: "stop" }] }, "[DONE]"))).toEqual({ counted: false, reason: "stream carried no usage" });
    expect(read("application/json", JSON.stringify({ choices: [] }))).toEqual({ counted: false, reason: "JSON answer has no usage" });
    expect(read("application/json", "{not json")).toEqual({ counted: false, reason: "answer is not valid JSON" });
    expect(read("text/plain", "12")).toEqual({ counted: false, reason: "answer is neither JSON nor an event stream" });
    // Negative or fractional counts are not counts.
    expect(read("application/json", JSON.stringify({ usage: { completion_tokens: -3 } }))).toMatchObject({ counted: false });
    expect(read("application/json", JSON.stringify({ usage: { completion_tokens: 2.5 } }))).toMatchObject({ counted: false });
  });

  it("bounds what it holds: an over-large JSON body or SSE event is not parsed", () => {
    const big = JSON.stringify({ pad: "x".repeat(300), usage: { completion_tokens: 9 } });
    expect(read("application/json", big, 7, 100)).toEqual({ counted: false, reason: "JSON answer over 100 bytes" });
    // The over-large event is skipped (its usage with it), a later small one is still read.
    expect(read("text/event-stream", sse({ pad: "x".repeat(300), usage: { completion_tokens: 9 } }), 7, 100)).toEqual({
      counted: false,
      reason: "an SSE event over 100 characters was skipped and no usage was read",
    });
    expect(read("text/event-stream", sse({ pad: "x".repeat(300) }, { usage: { completion_tokens: 6 } }), 7, 100)).toEqual({ counted: true, tokens: 6 });
    // One huge line in a single chunk, then a small event.
    expect(read("text/event-stream", sse({ pad: "y".repeat(500) }, { usage: { completion_tokens: 2 } }), 10_000, 100)).toEqual({ counted: true, tokens: 2 });
  });
});
