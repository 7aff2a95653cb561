import { describe, expect, it } from "vitest";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../../model/markup.js";
import type { GenerateResult } from "../../backends/backend.js";
import { reasoningParserNamed, toolParserNamed } from "../../backends/answer-parsers.js";
import { planTools } from "../../model/tool-markup.js";
import { answerPlan, readAnswer } from "./answer-plan.js";
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
    const plan = answerPlan({ toolParser: toolParserNamed("arbor", "test") }, planTools({ tools: [{ function: { name: "get_weather" } }] }), undefined);
    const text = `Checking. ${TOOL_CALL_OPEN}get_weather {"city":"Oslo"}${TOOL_CALL_CLOSE}`;
    const tc = new TokenChunks({ endpoint: "chat", callId: "c1", created: 5, model: "m", promptTokenIds: [1], logprobs: false, includeUsage: false, answer: plan });
    tc.start(null);
    const pieces = [text.slice(0, 12), text.slice(12, 30), text.slice(30)];
    const chunks = pieces.slice(0, -1).flatMap((p, i) => tc.delta({ ids: [i], logprobs: [-1], text: p }, null));
    chunks.push(...tc.finish({ ids: [], logprobs: [], text: pieces.at(-1)! }, result([0, 1, 2])));
    const content = chunks.map((c) => (choiceOf(c).delta as { content: string }).content).join("");
    const calls = chunks.flatMap((c) => ((choiceOf(c).delta as { tool_calls?: unknown[] }).tool_calls ?? []));
    const plain = readAnswer(text, "stop", plan, toolCallIdPrefix("c1"));
    expect(content).toBe(plain.message.content);
    // As vLLM streams a call: its header with empty arguments, then the arguments.
    expect(calls).toEqual(
      plain.message.tool_calls!.flatMap((c, i) => [
        { index: i, id: c.id, type: "function", function: { name: c.function.name, arguments: "" } },
        { index: i, function: { arguments: c.function.arguments } },
      ]),
    );
    expect(choiceOf(chunks.at(-1)!).finish_reason).toBe("tool_calls");
    expect(chunks.some((c) => ((choiceOf(c).delta as { content: string }).content).includes(TOOL_CALL_OPEN))).toBe(false);
  });

  it("chat with a reasoning parser: <think> goes out as reasoning_content deltas, held back across a split tag", () => {
    const plan = answerPlan({ toolParser: toolParserNamed("arbor", "test"), reasoningParser: reasoningParserNamed("think", "test") }, planTools({ tools: [{ function: { name: "calc" } }] }), undefined);
    const text = `<think>2+2, so call calc</think>Sure.${TOOL_CALL_OPEN}calc {"x":4}${TOOL_CALL_CLOSE}`;
    for (let cut = 1; cut < text.length; cut += 3) {
      const tc = new TokenChunks({ endpoint: "chat", callId: "c2", created: 5, model: "m", promptTokenIds: [1], logprobs: false, includeUsage: false, answer: plan });
      const chunks = [...tc.delta({ ids: [0], logprobs: [-1], text: text.slice(0, cut) }, null), ...tc.finish({ ids: [1], logprobs: [-1], text: text.slice(cut) }, result([0, 1]))];
      const deltas = chunks.map((c) => choiceOf(c).delta as { content: string; reasoning_content?: string });
      const plain = readAnswer(text, "stop", plan, toolCallIdPrefix("c2"));
      expect(deltas.map((d) => d.reasoning_content ?? "").join("")).toBe(plain.message.reasoning_content);
      expect(deltas.map((d) => d.content).join("")).toBe(plain.message.content);
      expect(plain.message).toMatchObject({ content: "Sure.", reasoning_content: "2+2, so call calc", tool_calls: [{ function: { name: "calc", arguments: '{"x":4}' } }] });
    }
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
