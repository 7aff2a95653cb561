import { describe, expect, it } from "vitest";
import { budgetField, prepareRequest } from "./openai-request.js";

describe("prepareRequest", () => {
  it("chat: forces token ids and logprobs, strips Arbor fields, records text messages", () => {
    const p = prepareRequest("chat", {
      model: "m",
      program_id: "p1",
      arbor_note: "x",
      messages: [
        { role: "developer", content: "rules" },
        { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
        { role: "assistant", content: null },
        { role: "tool", content: "42", name: "calc" },
      ],
      max_tokens: 4,
    });
    expect(p.upstreamBody).toEqual({
      model: "m",
      messages: expect.any(Array),
      max_tokens: 4,
      return_token_ids: true,
      logprobs: true,
    });
    // The model name the client asked for, kept for the recorded call.
    expect(p.requestedModel).toBe("m");
    expect(prepareRequest("completions", { prompt: "x" }).requestedModel).toBeUndefined();
    expect(p.messages).toEqual([
      { role: "system", content: "rules" },
      { role: "user", content: "ab" },
      { role: "assistant", content: "" },
      { role: "tool", content: "42", name: "calc" },
    ]);
    expect(p.clientWantsLogprobs).toBe(false);
    expect(p.bodyProgramId).toBe("p1");
    expect(prepareRequest("chat", { messages: [{ role: "user", content: "x" }], logprobs: true }).clientWantsLogprobs).toBe(true);
  });

  it("completions: logprobs 0 unless asked; prompt text or token ids", () => {
    const a = prepareRequest("completions", { prompt: "hello" });
    expect(a.upstreamBody).toEqual({ prompt: "hello", return_token_ids: true, logprobs: 0 });
    expect(a.messages).toEqual([{ role: "user", content: "hello" }]);
    expect(a.clientWantsLogprobs).toBe(false);
    const b = prepareRequest("completions", { prompt: [[5, 6]], logprobs: 3 });
    expect(b.upstreamBody.logprobs).toBe(3);
    expect(b.messages).toEqual([]);
    expect(b.clientWantsLogprobs).toBe(true);
    expect(b.stream).toBe(false);
    const s = prepareRequest("completions", { prompt: "x", stream: true, stream_options: { include_usage: true }, return_token_ids: true });
    expect(s).toMatchObject({ stream: true, clientWantsTokenIds: true });
    expect(s.upstreamBody).toEqual({ prompt: "x", stream: true, stream_options: { include_usage: true }, return_token_ids: true, logprobs: 0 });
    expect(prepareRequest("completions", { prompt: ["one"] }).messages).toEqual([{ role: "user", content: "one" }]);
  });

  it("chat: keeps assistant tool_calls and tool_call_id in the recorded messages", () => {
    const p = prepareRequest("chat", {
      messages: [
        { role: "user", content: "Weather?" },
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }, { function: { name: "noop", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "c1", content: "5C" },
        { role: "assistant", content: "done", tool_calls: [] },
      ],
    });
    expect(p.messages).toEqual([
      { role: "user", content: "Weather?" },
      { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' }, { id: "call_1_1", name: "noop", arguments: "{}" }] },
      { role: "tool", content: "5C", toolCallId: "c1" },
      { role: "assistant", content: "done" },
    ]);
  });

  it("chat: keeps an assistant turn's reasoning (reasoning_content, or vLLM's newer reasoning)", () => {
    const p = prepareRequest("chat", {
      messages: [
        { role: "user", content: "2+2?" },
        { role: "assistant", content: "4", reasoning_content: "add them" },
        { role: "user", content: "3+3?" },
        { role: "assistant", content: "6", reasoning: "again" },
        { role: "user", content: "ok", reasoning_content: null },
      ],
    });
    expect(p.messages.map((m) => m.reasoning)).toEqual([undefined, "add them", undefined, "again", undefined]);
  });

  it("names the field and reason for what it cannot serve", () => {
    const bad: [Parameters<typeof prepareRequest>[0], unknown, string][] = [
      ["chat", null, "request body must be a JSON object"],
      ["chat", { messages: [], stream: "yes" }, "stream: must be a boolean"],
      ["chat", { messages: [] }, "messages: must be a non-empty list"],
      ["chat", { messages: [{ role: "robot", content: "x" }] }, "messages[0].role: unknown role 'robot'"],
      ["chat", { messages: [{ role: "user", content: [{ type: "image_url" }] }] }, "messages[0].content[0]: only text parts"],
      ["chat", { messages: [{ role: "user", content: "x" }], n: 2 }, "n: only n=1 is supported"],
      ["chat", { messages: [{ role: "user", content: "x" }], logprobs: 1 }, "logprobs: must be a boolean"],
      ["chat", { messages: [{ role: "user", content: "x" }], program_id: 7 }, "program_id: must be a string"],
      ["chat", { messages: [{ role: "user", content: "x", tool_calls: [] }] }, "messages[0].tool_calls: only assistant messages make tool calls"],
      ["chat", { messages: [{ role: "assistant", content: "x", tool_calls: {} }] }, "messages[0].tool_calls: must be a list"],
      ["chat", { messages: [{ role: "assistant", content: "x", tool_calls: [{ type: "web" }] }] }, "messages[0].tool_calls[0].type: only function tool calls"],
      ["chat", { messages: [{ role: "assistant", content: "x", tool_calls: [{ function: { name: "f", arguments: {} } }] }] }, "messages[0].tool_calls[0].function.arguments: must be a string"],
      ["chat", { messages: [{ role: "assistant", content: "x", tool_calls: [{ function: { arguments: "{}" } }] }] }, "messages[0].tool_calls[0].function.name: must be a non-empty string"],
      ["chat", { messages: [{ role: "tool", content: "x", tool_call_id: 3 }] }, "messages[0].tool_call_id: must be a string"],
      ["chat", { messages: [{ role: "assistant", content: "x", reasoning_content: 3 }] }, "messages[0].reasoning_content: must be a string"],
      ["chat", { messages: [{ role: "user", content: "x", reasoning: "r" }] }, "messages[0].reasoning: only assistant messages carry reasoning"],
      ["chat", { messages: [{ role: "user", content: null }] }, "messages[0].content: must be a string or a list of text parts (only an assistant message may leave it out)"],
      ["chat", { messages: [{ role: "system", content: "s" }, { role: "user" }] }, "messages[1].content: must be a string or a list of text parts"],
      ["chat", { messages: [{ role: "developer" }] }, "messages[0].content: must be a string"],
      ["chat", { messages: [{ role: "tool", tool_call_id: "c", content: null }] }, "messages[0].content: must be a string"],
      ["completions", { prompt: ["a", "b"] }, "prompt: batched prompts are not supported"],
      ["completions", { prompt: [1, -2] }, "prompt: must be a string or a non-empty list of token ids"],
      ["completions", { prompt: "x", echo: true }, "echo: not supported"],
      ["completions", { prompt: "x", logprobs: -1 }, "logprobs: must be an integer >= 0"],
      ["chat", { model: 4, messages: [{ role: "user", content: "x" }] }, "model: must be a string of 1-256 characters"],
      ["completions", { model: "", prompt: "x" }, "model: must be a string of 1-256 characters"],
    ];
    for (const [endpoint, body, msg] of bad) expect(() => prepareRequest(endpoint, body)).toThrow(msg);
  });
});

describe("budgetField", () => {
  it("is chat's max_completion_tokens where set, else max_tokens; completions have only max_tokens", () => {
    expect(budgetField("chat", { max_completion_tokens: 5, max_tokens: 9 })).toBe("max_completion_tokens");
    expect(budgetField("chat", { max_completion_tokens: null, max_tokens: 9 })).toBe("max_tokens");
    expect(budgetField("chat", {})).toBe("max_tokens");
    expect(budgetField("completions", { max_completion_tokens: 5 })).toBe("max_tokens");
  });
});
