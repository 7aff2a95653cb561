import { describe, expect, it } from "vitest";
import type { GenerateResult } from "../../backends/backend.js";
import { toolParserNamed } from "../../backends/answer-parsers.js";
import { planTools } from "../../model/tool-markup.js";
import { answerPlan } from "./answer-plan.js";
import { contentTokenIds, stopReasonOf, tokenAnswer } from "./token-response.js";

const result: GenerateResult = { outputTokenIds: [7, 8, 2], logprobs: [-0.5, -Infinity, -0.125], finishReason: "stop", policyVersion: 3, promptTokenIds: [1, 5] };
const base = { callId: "ab-cd", created: 100, model: "m", promptTokenIds: [1, 5], result, decoded: { text: "hi", tokenTexts: ["h", "i", ""] } };

describe("tokenAnswer", () => {
  it("builds a chat.completion in the engine's shape, logprobs only when asked", () => {
    expect(tokenAnswer({ ...base, endpoint: "chat", logprobs: true })).toEqual({
      id: "chatcmpl-abcd",
      object: "chat.completion",
      created: 100,
      model: "m",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "hi" },
          logprobs: {
            content: [
              { token: "h", logprob: -0.5, bytes: [104], top_logprobs: [] },
              { token: "i", logprob: -9999, bytes: [105], top_logprobs: [] },
              { token: "", logprob: -0.125, bytes: [], top_logprobs: [] },
            ],
          },
          finish_reason: "stop",
          stop_reason: null,
          token_ids: [7, 8, 2],
        },
      ],
      usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 },
      prompt_token_ids: [1, 5],
      policy_version: 3,
    });
    expect((tokenAnswer({ ...base, endpoint: "chat", logprobs: false }).choices as { logprobs: unknown }[])[0]!.logprobs).toBeNull();
  });

  it("builds a text_completion with legacy logprobs and no policy_version when the engine reports none", () => {
    const a = tokenAnswer({ ...base, result: { ...result, policyVersion: null }, endpoint: "completions", logprobs: true });
    expect(a).toMatchObject({ id: "cmpl-abcd", object: "text_completion", usage: { total_tokens: 5 } });
    expect("policy_version" in a).toBe(false);
    expect((a.choices as unknown[])[0]).toEqual({
      index: 0,
      text: "hi",
      logprobs: { tokens: ["h", "i", ""], token_logprobs: [-0.5, -9999, -0.125], top_logprobs: [{ h: -0.5 }, { i: -9999 }, { "": -0.125 }], text_offset: [0, 1, 2] },
      finish_reason: "stop",
      stop_reason: null,
      token_ids: [7, 8, 2],
      prompt_token_ids: [1, 5],
    });
  });

  it("keeps the last token as content unless the answer stopped on it", () => {
    expect(contentTokenIds(result)).toEqual([7, 8]);
    expect(contentTokenIds({ ...result, finishReason: "length" })).toEqual([7, 8, 2]);
  });
});

describe("tokenAnswer with tools", () => {
  const arbor = { toolParser: toolParserNamed("arbor", "test") };
  const tools = answerPlan(arbor, planTools({ tools: [{ function: { name: "calc" } }] }), undefined);
  const decoded = (text: string) => ({ text });

  it("reads the policy's tool-call markup into tool_calls, ids from the call id", () => {
    const a = tokenAnswer({ ...base, endpoint: "chat", logprobs: false, decoded: decoded('Sure.<|tool_call|>calc {"x":1}<|/tool_call|>'), answer: tools });
    expect((a.choices as unknown[])[0]).toMatchObject({
      message: { role: "assistant", content: "Sure.", tool_calls: [{ id: "call_abcd_0", type: "function", function: { name: "calc", arguments: '{"x":1}' } }] },
      finish_reason: "tool_calls",
      token_ids: [7, 8, 2],
    });
  });

  it("keeps text without valid calls as content, and a cut-off answer's finish_reason", () => {
    const cut = tokenAnswer({ ...base, endpoint: "chat", logprobs: false, result: { ...result, finishReason: "length" }, decoded: decoded("<|tool_call|>calc {"), answer: tools });
    expect((cut.choices as unknown[])[0]).toMatchObject({ message: { content: "<|tool_call|>calc {" }, finish_reason: "length" });
    const none = answerPlan(arbor, planTools({ tools: [{ function: { name: "calc" } }], tool_choice: "none" }), "none");
    const raw = tokenAnswer({ ...base, endpoint: "chat", logprobs: false, decoded: decoded("<|tool_call|>calc<|/tool_call|>"), answer: none });
    expect((raw.choices as unknown[])[0]).toMatchObject({ message: { content: "<|tool_call|>calc<|/tool_call|>" }, finish_reason: "stop" });
  });
});

describe("stopReasonOf", () => {
  it("names the client's stop the generation ended on: its string, or its token id; null otherwise", () => {
    const stops = new Map<number, string | number>([
      [2, "</done>"],
      [9, 9],
    ]);
    const r = (ids: number[], finishReason: "stop" | "length") => ({ outputTokenIds: ids, logprobs: ids.map(() => -1), finishReason, policyVersion: 1, promptTokenIds: [1] });
    expect(stopReasonOf(r([7, 2], "stop"), stops)).toBe("</done>");
    expect(stopReasonOf(r([7, 9], "stop"), stops)).toBe(9);
    // The model's own end token, a cut-off answer, no stops asked.
    expect(stopReasonOf(r([7, 3], "stop"), stops)).toBeNull();
    expect(stopReasonOf(r([7, 2], "length"), stops)).toBeNull();
    expect(stopReasonOf(r([7, 2], "stop"), undefined)).toBeNull();
  });
});

