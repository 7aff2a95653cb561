import { describe, expect, it } from "vitest";
import { clientParam, inClientTerms } from "./client-fields.js";

describe("clientParam", () => {
  it("names a chat call's token-id prompt as its messages, and leaves completions' prompt and plain chat paths alone", () => {
    expect(clientParam("prompt", "chat")).toBe("messages");
    expect(clientParam("prompt", "completions")).toBe("prompt");
    expect(clientParam("messages[1].content", "chat")).toBe("messages[1].content");
    expect(clientParam("temperature", "chat", { messages: "input", messageFields: ["input"] })).toBe("temperature");
  });

  it("names a translated message by the client's field it came from, and the translated fields by the surface's names", () => {
    const anthropic = { stop: "stop_sequences", messageFields: ["system", "messages.0.content", "messages.1.content"] };
    expect(clientParam("messages[1].content", "chat", anthropic)).toBe("messages.0.content");
    expect(clientParam("messages[0].content", "chat", anthropic)).toBe("system");
    expect(clientParam("messages[2].tool_calls[0].function.arguments", "chat", anthropic)).toBe("messages.1.content");
    expect(clientParam("prompt", "chat", anthropic)).toBe("messages");
    expect(clientParam("stop", "chat", anthropic)).toBe("stop_sequences");
    const responses = { max_tokens: "max_output_tokens", messages: "input", messageFields: ["instructions", "input"] };
    expect(clientParam("messages[1].content", "chat", responses)).toBe("input");
    expect(clientParam("messages[7].content", "chat", responses)).toBe("input");
    expect(clientParam("messages", "chat", responses)).toBe("input");
    expect(clientParam("prompt", "chat", responses)).toBe("input");
    expect(clientParam("max_tokens", "chat", responses)).toBe("max_output_tokens");
  });
});

describe("inClientTerms", () => {
  it("renames an error body's param and its message's prefix, keeping the rest", () => {
    const body = { error: { message: "messages[1].content: has at least 3000 tokens", type: "invalid_request_error", param: "messages[1].content", code: "context_length_exceeded" } };
    expect(inClientTerms(body, "chat", { messageFields: ["system", "messages.0.content"] })).toEqual({
      error: { message: "messages.0.content: has at least 3000 tokens", type: "invalid_request_error", param: "messages.0.content", code: "context_length_exceeded" },
    });
    // A message that does not start with the param keeps its words.
    expect(inClientTerms({ error: { message: "too long", param: "prompt" } }, "chat")).toEqual({ error: { message: "too long", param: "messages" } });
    for (const other of [null, "text", { error: "x" }, { error: { message: "m", param: null } }, { detail: "vLLM's" }]) {
      expect(inClientTerms(other, "chat", { messages: "input" })).toBe(other);
    }
    const same = { error: { message: "model: unknown", param: "model" } };
    expect(inClientTerms(same, "chat", { messages: "input" })).toBe(same);
  });
});
