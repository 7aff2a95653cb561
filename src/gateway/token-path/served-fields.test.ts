import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../http-errors.js";
import { checkServedFields } from "./served-fields.js";
import { tokenSampling } from "./sampling.js";

describe("fields the token path serves", () => {
  it("serves what the chat and completions APIs ask of generation, and accepts identifiers and tags", () => {
    const chat = {
      model: "m",
      messages: [{ role: "user", content: "x" }],
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 5,
      tools: [],
      tool_choice: "auto",
      parallel_tool_calls: false,
      user: "u",
      metadata: { a: "b" },
      store: false,
      service_tier: "auto",
      prompt_cache_key: "k",
      safety_identifier: "s",
    };
    expect(() => checkServedFields("chat", chat)).not.toThrow();
    expect(() => checkServedFields("completions", { model: "m", prompt: "x", max_tokens: 3, echo: false, best_of: 1, suffix: null })).not.toThrow();
    // An absent value asks for nothing.
    expect(() => checkServedFields("chat", { messages: [], reasoning_effort: null, functions: undefined })).not.toThrow();
  });

  it("refuses a field it would otherwise drop, naming it (through tokenSampling too)", () => {
    const refused: [Parameters<typeof checkServedFields>[0], Record<string, unknown>, RegExp][] = [
      ["chat", { reasoning_effort: "high" }, /^reasoning_effort: the policy's reasoning cannot be steered/],
      ["chat", { functions: [{ name: "f" }] }, /^functions: the legacy function-calling fields are not supported; send tools/],
      ["chat", { function_call: "auto" }, /^function_call: .*send tool_choice/],
      ["chat", { modalities: ["text", "audio"] }, /^modalities: is not supported on the token path \(fields served: model, /],
      ["chat", { prediction: { type: "content", content: "x" } }, /^prediction: is not supported/],
      ["chat", { chat_template_kwargs: { enable_thinking: false } }, /^chat_template_kwargs: is not supported/],
      ["completions", { tools: [] }, /^tools: is not supported/],
    ];
    for (const [endpoint, body, msg] of refused) {
      expect(() => checkServedFields(endpoint, body)).toThrow(InvalidRequestError);
      expect(() => tokenSampling(endpoint, body, false)).toThrow(msg);
    }
  });

  it("refuses stream_options the engine, vLLM and OpenAI refuse, and the engine's continuous usage it would drop", () => {
    const refused: [Record<string, unknown>, RegExp][] = [
      [{ stream_options: { include_usage: true } }, /^stream_options: can only be set when stream is true/],
      [{ stream: false, stream_options: {} }, /^stream_options: can only be set when stream is true/],
      [{ stream: true, stream_options: "yes" }, /^stream_options: expected an object, got "yes"/],
      [{ stream: true, stream_options: [] }, /^stream_options: expected an object/],
      [{ stream: true, stream_options: { include_usage: "yes" } }, /^stream_options\.include_usage: must be a boolean/],
      [{ stream: true, stream_options: { continuous_usage_stats: true } }, /^stream_options\.continuous_usage_stats: is not supported on the token path/],
    ];
    for (const [body, msg] of refused) expect(() => checkServedFields("chat", body)).toThrow(msg);
    for (const ok of [{ stream_options: null }, { stream: true, stream_options: { include_usage: false, continuous_usage_stats: false } }]) {
      expect(() => checkServedFields("completions", ok)).not.toThrow();
    }
  });
});
