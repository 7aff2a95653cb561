import { describe, expect, it } from "vitest";
import { tokenSampling } from "./sampling.js";

describe("tokenSampling", () => {
  it("maps OpenAI sampling fields, with OpenAI's defaults", () => {
    expect(tokenSampling("chat", { model: "m", max_completion_tokens: 9, temperature: 0.5, top_p: 0.9, seed: 4, stop: "x", stop_token_ids: [3] }, true)).toEqual({
      maxTokens: 9,
      maxTokensField: "max_completion_tokens",
      temperature: 0.5,
      topP: 0.9,
      seed: 4,
      stop: ["x"],
      stopField: "stop",
      stopTokenIds: [3],
      logprobs: true,
      model: "m",
    });
    expect(tokenSampling("chat", { messages: [] }, false)).toEqual({ maxTokens: undefined, maxTokensField: "max_tokens", temperature: 1, stop: [], stopField: "stop", stopTokenIds: [], logprobs: false, model: "arbor" });
    expect(tokenSampling("completions", { prompt: "x", logprobs: 0 }, true)).toMatchObject({ maxTokens: 16, logprobs: true });
    // A surface that translated the client's field names it (the Responses API's max_output_tokens).
    expect(tokenSampling("chat", { max_tokens: 7, stop: ["x"] }, false, { max_tokens: "max_output_tokens", stop: "stop_sequences" })).toMatchObject({
      maxTokens: 7,
      maxTokensField: "max_output_tokens",
      stopField: "stop_sequences",
    });
    expect(() => tokenSampling("chat", { max_tokens: 0 }, false, { max_tokens: "max_output_tokens" })).toThrow(/^max_output_tokens: must be an integer >= 1/);
    expect(() => tokenSampling("chat", { stop: [""] }, false, { stop: "stop_sequences" })).toThrow(/^stop_sequences: must be a non-empty string/);
    // No-op values of unsupported controls are fine.
    expect(() => tokenSampling("chat", { presence_penalty: 0, frequency_penalty: null, logit_bias: {}, top_logprobs: 0, response_format: { type: "text" } }, false)).not.toThrow();
  });

  it("carries vLLM's logit_bias, repetition_penalty, min_tokens and ignore_eos (dropped at their defaults)", () => {
    expect(tokenSampling("chat", { max_tokens: 8, logit_bias: { "5": 10, "7": -100 }, repetition_penalty: 1.2, min_tokens: 3, ignore_eos: true }, false)).toMatchObject({
      logitBias: { "5": 10, "7": -100 },
      repetitionPenalty: 1.2,
      minTokens: 3,
      ignoreEos: true,
    });
    const defaults = tokenSampling("chat", { logit_bias: {}, repetition_penalty: 1, min_tokens: 0, ignore_eos: false, top_k: -1 }, false);
    for (const k of ["logitBias", "repetitionPenalty", "minTokens", "ignoreEos"]) expect(defaults).not.toHaveProperty(k);
  });

  it("refuses what it cannot honour, naming the field", () => {
    const cases: [string, Record<string, unknown>, "chat" | "completions"][] = [
      ["presence_penalty", { presence_penalty: 1 }, "chat"],
      ["frequency_penalty", { frequency_penalty: -1 }, "chat"],
      ["logit_bias.x", { logit_bias: { x: 10 } }, "chat"],
      ["logit_bias.5", { logit_bias: { "5": "high" } }, "chat"],
      ["repetition_penalty", { repetition_penalty: 0 }, "chat"],
      ["min_tokens", { min_tokens: 5, max_tokens: 4 }, "completions"],
      ["min_tokens", { min_tokens: -1 }, "chat"],
      ["ignore_eos", { ignore_eos: "yes" }, "chat"],
      ["top_k", { top_k: 20 }, "chat"],
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
