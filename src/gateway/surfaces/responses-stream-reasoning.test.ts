// The reasoning item of a streamed Responses answer: the chunks' reasoning_content deltas become a
// reasoning item before the message, in vLLM's event order, and the final Response equals the plain one.
import { describe, expect, it } from "vitest";
import { BackendProtocolError } from "../../backends/backend.js";
import type { ChatChunkLike } from "./anthropic-stream.js";
import { responsesToChat } from "./responses-request.js";
import { chatToResponse } from "./responses-response.js";
import { ChatChunkToResponseEvents } from "./responses-stream.js";

const upstream = { backend: "e0", url: "http://e0/v1" };
const { echo } = responsesToChat({ model: "arbor-tiny", input: "x" });

function convert(chunks: ChatChunkLike[]) {
  const c = new ChatChunkToResponseEvents(echo, 1, "call-uuid", upstream);
  return [...chunks.flatMap((ch) => c.push(ch)), ...c.finish()];
}

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
      1,
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
    expect(final).toEqual(chatToResponse({ id: "chatcmpl-c", choices: [{ message: { content: "", reasoning_content: "Hmm" }, finish_reason: "length" }] }, echo, 1, "call-uuid", upstream));
    const later = convert([{ id: "chatcmpl-d", choices: [{ delta: { reasoning_content: "Hmm", content: "Ye" }, finish_reason: "length" }] }]);
    const laterFinal = (later.at(-1) as unknown as { response: unknown }).response;
    expect(laterFinal).toMatchObject({ output: [{ type: "reasoning", status: "completed" }, { type: "message", status: "incomplete" }] });
    expect(laterFinal).toEqual(chatToResponse({ id: "chatcmpl-d", choices: [{ message: { content: "Ye", reasoning_content: "Hmm" }, finish_reason: "length" }] }, echo, 1, "call-uuid", upstream));
  });

  it("blames the upstream for reasoning that resumes after the answer began", () => {
    const c = new ChatChunkToResponseEvents(echo, 1, "f", upstream);
    c.push({ choices: [{ delta: { reasoning_content: "a", content: "b" } }] });
    expect(() => c.push({ choices: [{ delta: { reasoning_content: "c" } }] })).toThrow(BackendProtocolError);
  });
});
