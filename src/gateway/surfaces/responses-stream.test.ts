import { describe, expect, it } from "vitest";
import { BackendProtocolError } from "../../backends/backend.js";
import { InvalidRequestError } from "../http-errors.js";
import type { ChatChunkLike } from "./anthropic-stream.js";
import { responsesToChat } from "./responses-request.js";
import { chatToResponse } from "./responses-response.js";
import { ChatChunkToResponseEvents, formatResponsesSse, responsesStreamSurface } from "./responses-stream.js";
import { UpstreamStreamError } from "./stream-surface.js";

const upstream = { backend: "e0", url: "http://e0/v1" };
const { echo } = responsesToChat({ model: "arbor-tiny", input: "x", instructions: "Be brief.", max_output_tokens: 32 });

function convert(chunks: ChatChunkLike[]) {
  const c = new ChatChunkToResponseEvents(echo, 1700000000, "call-uuid", upstream);
  return [...chunks.flatMap((ch) => c.push(ch)), ...c.finish()];
}

describe("ChatChunkToResponseEvents", () => {
  it("streams text then a function call in the Responses event order", () => {
    const events = convert([
      { id: "chatcmpl-s1", choices: [{ delta: { content: "Hel" } }] },
      { id: "chatcmpl-s1", choices: [{ delta: { content: "lo" } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, id: "call_1", function: { name: "weather", arguments: '{"ci' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] } }] },
      { choices: [{ delta: {}, finish_reason: "tool_calls" }] },
      { choices: [], usage: { prompt_tokens: 12, completion_tokens: 9 } },
    ]);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]).toMatchObject({ response: { id: "resp_s1", status: "in_progress", output: [], usage: null, instructions: "Be brief.", created_at: 1700000000 } });
    expect(events[2]).toMatchObject({ output_index: 0, item: { type: "message", id: "msg_s1", status: "in_progress", content: [] } });
    expect(events[5]).toEqual({ type: "response.output_text.delta", sequence_number: 5, item_id: "msg_s1", output_index: 0, content_index: 0, delta: "lo", logprobs: [] });
    expect(events[6]).toMatchObject({ text: "Hello" });
    expect(events[9]).toMatchObject({ output_index: 1, item: { type: "function_call", id: "fc_s1_0", call_id: "call_1", name: "weather", arguments: "", status: "in_progress" } });
    expect(events[12]).toMatchObject({ name: "weather", arguments: '{"city":"Paris"}' });
    const done = events.at(-1) as unknown as { response: Record<string, unknown> };
    expect(done.response).toMatchObject({
      id: "resp_s1",
      status: "completed",
      output: [
        { type: "message", id: "msg_s1", status: "completed", content: [{ type: "output_text", text: "Hello", annotations: [] }] },
        { type: "function_call", id: "fc_s1_0", call_id: "call_1", name: "weather", arguments: '{"city":"Paris"}', status: "completed" },
      ],
      usage: { input_tokens: 12, output_tokens: 9, total_tokens: 21 },
    });
  });

  it("ends a length stop with response.incomplete, and an empty answer with no items", () => {
    const len = convert([{ id: "chatcmpl-a", choices: [{ delta: { content: "abc" }, finish_reason: "length" }] }]);
    expect(len.at(-1)).toMatchObject({ type: "response.incomplete", response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [{ status: "incomplete" }] } });
    const empty = convert([{ choices: [{ delta: {}, finish_reason: "stop" }] }]);
    expect(empty.map((e) => e.type)).toEqual(["response.created", "response.in_progress", "response.completed"]);
    expect(empty[0]).toMatchObject({ response: { id: "resp_call-uuid" } });
  });

  it("blames the upstream for streams it cannot translate", () => {
    const cut = new ChatChunkToResponseEvents(echo, 1, "f", upstream);
    cut.push({ choices: [{ delta: { content: "a" } }] });
    expect(() => cut.finish()).toThrow(BackendProtocolError);
    const inter = new ChatChunkToResponseEvents(echo, 1, "f", upstream);
    inter.push({ choices: [{ delta: { tool_calls: [{ index: 0, id: "a", function: { name: "t", arguments: "{" } }] } }] });
    inter.push({ choices: [{ delta: { tool_calls: [{ index: 1, id: "b", function: { name: "t", arguments: "{}" } }] } }] });
    expect(() => inter.push({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: "}" } }] } }] })).toThrow(/continued after/);
    expect(() => new ChatChunkToResponseEvents(echo, 1, "f", upstream).push({ choices: [{ delta: { tool_calls: [{ index: 0 }] } }] })).toThrow(/without a function name/);
  });

  it("reports failures as error events the openai SDK raises, and frames SSE", () => {
    const surface = responsesStreamSurface(echo, 1, "f", upstream);
    surface.chunk({ id: "chatcmpl-z", choices: [{ delta: { content: "a" } }] }, {});
    const frame = surface.fail(new UpstreamStreamError('{"error":{"message":"engine exploded"}}', { error: { message: "engine exploded" } }));
    expect(frame.startsWith("event: error\ndata: ")).toBe(true);
    const data = JSON.parse(frame.split("data: ")[1] as string);
    expect(data).toMatchObject({ type: "error", sequence_number: 5, code: "backend_protocol", message: expect.stringMatching(/engine exploded/), error: { message: expect.stringMatching(/engine exploded/) } });
    expect(surface.errorResponse(new InvalidRequestError("stream", "nope"))).toMatchObject({ status: 400, body: { error: { param: "stream" } } });
    expect(formatResponsesSse({ type: "response.completed", sequence_number: 3 })).toBe('event: response.completed\ndata: {"type":"response.completed","sequence_number":3}\n\n');
  });
});

describe("ChatChunkToResponseEvents reasoning", () => {
  it("streams the reasoning as its own item before the message, numbered as the plain answer's output", () => {
    const events = convert([
      { id: "chatcmpl-r", choices: [{ delta: { reasoning_content: "Let me " } }] },
      { id: "chatcmpl-r", choices: [{ delta: { reasoning_content: "see.", content: "The " } }] },
      { id: "chatcmpl-r", choices: [{ delta: { content: "answer." }, finish_reason: "stop" }] },
      { choices: [], usage: { prompt_tokens: 5, completion_tokens: 9 } },
    ]);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.reasoning_text.delta",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[2]).toMatchObject({ output_index: 0, item: { type: "reasoning", id: "rs_r", summary: [], content: [], status: "in_progress" } });
    expect(events[3]).toMatchObject({ item_id: "rs_r", output_index: 0, content_index: 0, part: { type: "reasoning_text", text: "" } });
    expect(events[5]).toEqual({ type: "response.reasoning_text.delta", sequence_number: 5, item_id: "rs_r", output_index: 0, content_index: 0, delta: "see." });
    expect(events[6]).toMatchObject({ item_id: "rs_r", output_index: 0, content_index: 0, text: "Let me see." });
    expect(events[8]).toMatchObject({ output_index: 0, item: { type: "reasoning", content: [{ type: "reasoning_text", text: "Let me see." }], status: "completed" } });
    expect(events[9]).toMatchObject({ output_index: 1, item: { type: "message", id: "msg_r" } });
    expect(events[11]).toMatchObject({ output_index: 1, item_id: "msg_r", delta: "The " });
    const plain = chatToResponse(
      { id: "chatcmpl-r", choices: [{ message: { content: "The answer.", reasoning_content: "Let me see." }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 9 } },
      echo,
      1700000000,
      "call-uuid",
      upstream,
    );
    expect((events.at(-1) as unknown as { response: unknown }).response).toEqual(plain);
  });

  it("marks a reasoning cut off by the length incomplete, as the plain answer does; one closed before the text stays completed", () => {
    const cut = convert([{ id: "chatcmpl-c", choices: [{ delta: { reasoning_content: "Hmm" }, finish_reason: "length" }] }]);
    const final = (cut.at(-1) as unknown as { type: string; response: { output: unknown[] } }).response;
    expect(cut.at(-1)?.type).toBe("response.incomplete");
    expect(final.output).toEqual([{ type: "reasoning", id: "rs_c", summary: [], content: [{ type: "reasoning_text", text: "Hmm" }], status: "incomplete" }]);
    expect(final).toEqual(chatToResponse({ id: "chatcmpl-c", choices: [{ message: { content: "", reasoning_content: "Hmm" }, finish_reason: "length" }] }, echo, 1700000000, "call-uuid", upstream));
    const later = convert([{ id: "chatcmpl-d", choices: [{ delta: { reasoning_content: "Hmm", content: "Ye" }, finish_reason: "length" }] }]);
    const laterFinal = (later.at(-1) as unknown as { response: unknown }).response;
    expect(laterFinal).toMatchObject({ output: [{ type: "reasoning", status: "completed" }, { type: "message", status: "incomplete" }] });
    expect(laterFinal).toEqual(chatToResponse({ id: "chatcmpl-d", choices: [{ message: { content: "Ye", reasoning_content: "Hmm" }, finish_reason: "length" }] }, echo, 1700000000, "call-uuid", upstream));
  });

  it("blames the upstream for reasoning that resumes after the answer began", () => {
    const c = new ChatChunkToResponseEvents(echo, 1700000000, "f", upstream);
    c.push({ choices: [{ delta: { reasoning_content: "a", content: "b" } }] });
    expect(() => c.push({ choices: [{ delta: { reasoning_content: "c" } }] })).toThrow(BackendProtocolError);
  });
});
