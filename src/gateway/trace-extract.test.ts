import { describe, expect, it } from "vitest";
import { extractTrace, withoutLogprobs } from "./trace-extract.js";

describe("extractTrace", () => {
  const chat = {
    prompt_token_ids: [1, 2],
    policy_version: 2,
    choices: [
      {
        message: { role: "assistant", content: "hi" },
        finish_reason: "tool_calls",
        token_ids: [7, 8],
        logprobs: { content: [{ logprob: -0.5 }, { logprob: 0 }] },
      },
    ],
  };

  it("reads token ids, logprobs, text, finish reason and policy version", () => {
    expect(extractTrace("chat", chat)).toEqual({
      promptTokenIds: [1, 2],
      outputTokenIds: [7, 8],
      logprobs: [-0.5, 0],
      outputText: "hi",
      finishReason: "stop",
      policyVersion: 2,
    });
    const cmpl = {
      policy_version: 0,
      choices: [{ text: "t", finish_reason: "length", token_ids: [3], prompt_token_ids: [9], logprobs: { token_logprobs: [-1] } }],
    };
    expect(extractTrace("completions", cmpl)).toMatchObject({ promptTokenIds: [9], outputTokenIds: [3], logprobs: [-1], finishReason: "length" });
  });

  it("refuses answers that cannot be traced exactly", () => {
    const c0 = chat.choices[0] as object;
    expect(() => extractTrace("chat", { ...chat, choices: [{ ...c0, token_ids: undefined }] })).toThrow("returned no choices[0].token_ids");
    expect(() => extractTrace("chat", { ...chat, prompt_token_ids: undefined })).toThrow("returned no prompt_token_ids");
    expect(() => extractTrace("chat", { ...chat, choices: [{ ...c0, token_ids: [7] }] })).toThrow("returned 2 logprobs for 1 output tokens");
    expect(() => extractTrace("chat", { ...chat, choices: [{ ...c0, logprobs: { content: [{ logprob: -1 }, { logprob: 0.5 }] } }] })).toThrow(
      "invalid logprob at output token 1",
    );
    expect(() => extractTrace("chat", { ...chat, policy_version: undefined })).toThrow("returned no policy_version");
    expect(() => extractTrace("chat", { choices: [] })).toThrow("returned no choices[0]");
  });

  it("withoutLogprobs nulls every choice's logprobs and keeps the rest", () => {
    const out = withoutLogprobs(chat);
    expect(out.choices[0].logprobs).toBeNull();
    expect(out.choices[0].token_ids).toEqual([7, 8]);
    expect(chat.choices[0]?.logprobs).not.toBeNull(); // input untouched
  });
});
