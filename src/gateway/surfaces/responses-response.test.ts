import { describe, expect, it } from "vitest";
import { BackendProtocolError } from "../../backends/backend.js";
import { responsesToChat } from "./responses-request.js";
import { chatToResponse } from "./responses-response.js";

const upstream = { backend: "e0", url: "http://e0/v1" };
const { echo } = responsesToChat({ model: "arbor-tiny", input: "x", instructions: "Be brief.", max_output_tokens: 8 });

describe("chatToResponse", () => {
  it("builds a completed Response with a message and function calls", () => {
    const res = chatToResponse(
      {
        id: "chatcmpl-abc",
        choices: [
          {
            message: { content: "Checking.", tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } }, { function: { name: "time", arguments: "{}" } }] },
            finish_reason: "tool_calls",
          },
        ],
        usage: { prompt_tokens: 20, completion_tokens: 11, prompt_tokens_details: { cached_tokens: 4 } },
      },
      echo,
      1700000000,
      "fallback",
      upstream,
    );
    expect(res).toMatchObject({ id: "resp_abc", object: "response", created_at: 1700000000, status: "completed", incomplete_details: null, model: "arbor-tiny", instructions: "Be brief.", max_output_tokens: 8 });
    expect(res.output).toEqual([
      { type: "message", id: "msg_abc", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Checking.", annotations: [] }] },
      { type: "function_call", id: "fc_abc_0", call_id: "call_1", name: "weather", arguments: '{"city":"Paris"}', status: "completed" },
      { type: "function_call", id: "fc_abc_1", call_id: "call_abc_1", name: "time", arguments: "{}", status: "completed" },
    ]);
    expect(res.usage).toEqual({ input_tokens: 20, input_tokens_details: { cached_tokens: 4 }, output_tokens: 11, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 31 });
  });

  it("marks a length stop incomplete and falls back to the given id", () => {
    const res = chatToResponse({ choices: [{ message: { content: "abc" }, finish_reason: "length" }], usage: { prompt_tokens: 3, completion_tokens: 8 } }, echo, 1, "call-uuid-1", upstream);
    expect(res.id).toBe("resp_call-uuid-1");
    expect(res.status).toBe("incomplete");
    expect(res.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(res.output[0]).toMatchObject({ type: "message", status: "incomplete" });
  });

  it("emits no message item for empty text", () => {
    const res = chatToResponse({ id: "x", choices: [{ message: { content: "" }, finish_reason: "stop" }] }, echo, 1, "f", upstream);
    expect(res.output).toEqual([]);
    expect(res.usage.total_tokens).toBe(0);
  });

  it("blames the upstream for answers it cannot translate", () => {
    expect(() => chatToResponse({ choices: [] }, echo, 1, "f", upstream)).toThrow(BackendProtocolError);
    expect(() => chatToResponse({ choices: [{ message: { content: "a" }, finish_reason: "weird" }] }, echo, 1, "f", upstream)).toThrow(/weird/);
  });
});

describe("chatToResponse reasoning", () => {
  it("puts the answer's reasoning first, as a reasoning item in vLLM's shape", () => {
    const chat = { id: "chatcmpl-r", choices: [{ message: { content: "The answer.", reasoning_content: "Let me see." }, finish_reason: "stop" }] };
    const res = chatToResponse(chat, echo, 1, "fallback", upstream);
    expect(res.output.map((o) => o.type)).toEqual(["reasoning", "message"]);
    expect(res.output[0]).toEqual({ type: "reasoning", id: "rs_r", summary: [], content: [{ type: "reasoning_text", text: "Let me see." }], status: "completed" });
  });
});
