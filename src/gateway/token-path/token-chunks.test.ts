import { describe, expect, it } from "vitest";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../../model/markup.js";
import type { GenerateResult } from "../../backends/backend.js";
import { planTools, toolCallAnswer } from "../../model/tool-markup.js";
import { TokenChunks, visibleChunk } from "./token-chunks.js";
import { toolCallIdPrefix } from "./token-response.js";

const result = (ids: number[], finishReason: GenerateResult["finishReason"] = "stop"): GenerateResult => ({
  outputTokenIds: ids, logprobs: ids.map(() => -1), finishReason, policyVersion: 2, promptTokenIds: [1, 2],
});
const choiceOf = (c: Record<string, unknown>): Record<string, unknown> => (c.choices as Record<string, unknown>[])[0] as Record<string, unknown>;

describe("TokenChunks", () => {
  it("chat: role chunk with the prompt ids, content deltas with ids, finish and usage chunks", () => {
    const tc = new TokenChunks({ endpoint: "chat", callId: "ab-cd", created: 5, model: "m", promptTokenIds: [1, 2], logprobs: true, includeUsage: true });
    const [role] = tc.start(2);
    expect(role).toMatchObject({ id: "chatcmpl-abcd", object: "chat.completion.chunk", prompt_token_ids: [1, 2], policy_version: 2 });
    const [c1] = tc.delta({ ids: [7, 8], logprobs: [-1, -Infinity], text: "hi", tokenTexts: ["h", "i"] }, 2);
    expect(choiceOf(c1!)).toMatchObject({ delta: { content: "hi" }, token_ids: [7, 8], finish_reason: null });
    expect((choiceOf(c1!).logprobs as { content: { logprob: number }[] }).content.map((c) => c.logprob)).toEqual([-1, -9999]);
    const [last, usage] = tc.finish({ ids: [], logprobs: [], text: "!" }, result([7, 8, 0]));
    expect(choiceOf(last!)).toMatchObject({ delta: { content: "!" }, finish_reason: "stop", token_ids: [] });
    expect(usage).toMatchObject({ choices: [], usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } });
    // What a client that asked for neither sees.
    const seen = visibleChunk(c1!, { logprobs: false, tokenIds: false });
    expect(choiceOf(seen)).toEqual({ index: 0, delta: { content: "hi" }, logprobs: null, finish_reason: null });
    expect(visibleChunk(role!, { logprobs: false, tokenIds: false }).prompt_token_ids).toBeUndefined();
  });

  it("chat with tools: the markup is read out into tool_calls deltas, adding up to the non-streamed answer", () => {
    const plan = planTools({ tools: [{ function: { name: "get_weather" } }] })!;
    const text = `Checking. ${TOOL_CALL_OPEN}get_weather {"city":"Oslo"}${TOOL_CALL_CLOSE}`;
    const tc = new TokenChunks({ endpoint: "chat", callId: "c1", created: 5, model: "m", promptTokenIds: [1], logprobs: false, includeUsage: false, tools: plan });
    tc.start(null);
    const pieces = [text.slice(0, 12), text.slice(12, 30), text.slice(30)];
    const chunks = pieces.slice(0, -1).flatMap((p, i) => tc.delta({ ids: [i], logprobs: [-1], text: p }, null));
    chunks.push(...tc.finish({ ids: [], logprobs: [], text: pieces.at(-1)! }, result([0, 1, 2])));
    const content = chunks.map((c) => (choiceOf(c).delta as { content: string }).content).join("");
    const calls = chunks.flatMap((c) => ((choiceOf(c).delta as { tool_calls?: unknown[] }).tool_calls ?? []));
    const plain = toolCallAnswer(text, "stop", plan, toolCallIdPrefix("c1"));
    expect(content).toBe(plain.message.content);
    expect(calls).toEqual(plain.message.tool_calls!.map((c, i) => ({ index: i, ...c })));
    expect(choiceOf(chunks.at(-1)!).finish_reason).toBe("tool_calls");
    expect(chunks.some((c) => ((choiceOf(c).delta as { content: string }).content).includes(TOOL_CALL_OPEN))).toBe(false);
  });

  it("completions: prompt ids on the first chunk's choice, logprobs with running text offsets", () => {
    const tc = new TokenChunks({ endpoint: "completions", callId: "x", created: 5, model: "m", promptTokenIds: [3], logprobs: true, includeUsage: false });
    expect(tc.start(null)).toEqual([]);
    const [a] = tc.delta({ ids: [4, 5], logprobs: [-1, -2], text: "ab", tokenTexts: ["a", "b"] }, null);
    const [b] = tc.finish({ ids: [], logprobs: [], text: "" }, result([4, 5], "length"));
    expect(a).toMatchObject({ id: "cmpl-x", object: "text_completion" });
    expect(choiceOf(a!)).toMatchObject({ text: "ab", prompt_token_ids: [3], token_ids: [4, 5], logprobs: { tokens: ["a", "b"], token_logprobs: [-1, -2], text_offset: [0, 1] } });
    expect(choiceOf(b!)).toMatchObject({ text: "", finish_reason: "length" });
    expect(choiceOf(b!).prompt_token_ids).toBeUndefined();
  });
});
