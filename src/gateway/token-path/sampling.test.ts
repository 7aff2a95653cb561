import { describe, expect, it } from "vitest";
import { tokenSampling } from "./sampling.js";

describe("tokenSampling", () => {
  it("maps OpenAI sampling fields, with OpenAI's defaults", () => {
    expect(tokenSampling("chat", { model: "m", max_completion_tokens: 9, temperature: 0.5, top_p: 0.9, seed: 4, stop: "x", stop_token_ids: [3] }, true)).toEqual({
      maxTokens: 9,
      temperature: 0.5,
      topP: 0.9,
      seed: 4,
      stop: ["x"],
      stopTokenIds: [3],
      logprobs: true,
      model: "m",
    });
    expect(tokenSampling("chat", { messages: [] }, false)).toEqual({ maxTokens: undefined, temperature: 1, stop: [], stopTokenIds: [], logprobs: false, model: "arbor" });
    expect(tokenSampling("completions", { prompt: "x", logprobs: 0 }, true)).toMatchObject({ maxTokens: 16, logprobs: true });
    // No-op values of unsupported controls are fine.
    expect(() => tokenSampling("chat", { presence_penalty: 0, frequency_penalty: null, logit_bias: {}, top_logprobs: 0, response_format: { type: "text" } }, false)).not.toThrow();
  });

  it("refuses what it cannot honour, naming the field", () => {
    const cases: [string, Record<string, unknown>, "chat" | "completions"][] = [
      ["presence_penalty", { presence_penalty: 1 }, "chat"],
      ["frequency_penalty", { frequency_penalty: -1 }, "chat"],
      ["logit_bias", { logit_bias: { "5": 10 } }, "chat"],
      ["response_format", { response_format: { type: "json_object" } }, "chat"],
      ["top_logprobs", { logprobs: true, top_logprobs: 3 }, "chat"],
      ["logprobs", { logprobs: 2 }, "completions"],
      ["max_tokens", { max_tokens: 0 }, "completions"],
      ["max_completion_tokens", { max_completion_tokens: 1.5 }, "chat"],
      ["temperature", { temperature: "hot" }, "chat"],
      ["top_p", { top_p: 0 }, "chat"],
      ["seed", { seed: 0.5 }, "chat"],
      ["stop", { stop: [""] }, "chat"],
      ["stop_token_ids", { stop_token_ids: [-1] }, "chat"],
      ["suffix", { suffix: "end" }, "completions"],
    ];
    for (const [field, body, endpoint] of cases) {
      expect(() => tokenSampling(endpoint, body, false), field).toThrow(new RegExp(`^${field}: `));
    }
  });
});
