import { describe, expect, it } from "vitest";
import { StreamTrace } from "./stream-trace.js";
import { TraceShapeError } from "./trace-extract.js";

const env = (choices: unknown[], extra: object = {}): object => ({ id: "x", object: "chat.completion.chunk", policy_version: 2, choices, ...extra });
const tok = (content: string, id: number, lp: number, finish: string | null = null): object => ({
  index: 0, delta: { content }, logprobs: { content: [{ token: content, logprob: lp }] }, finish_reason: finish, token_ids: [id],
});

describe("StreamTrace", () => {
  it("accumulates a chat stream and hides unrequested fields", () => {
    const st = new StreamTrace("chat", { clientWantsLogprobs: false, clientWantsTokenIds: false });
    const first = st.push(env([{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }], { prompt_token_ids: [1, 2] }));
    expect(first.prompt_token_ids).toBeUndefined();
    const mid = st.push(env([tok("a", 7, -0.5)]));
    expect(mid.choices[0]).toEqual({ index: 0, delta: { content: "a" }, logprobs: null, finish_reason: null });
    st.push(env([tok("b", 8, -1, "length")]));
    st.push(env([], { usage: { prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 } }));
    expect(st.finish()).toEqual({ promptTokenIds: [1, 2], outputTokenIds: [7, 8], logprobs: [-0.5, -1], outputText: "ab", finishReason: "length", policyVersion: 2 });
  });

  it("accumulates a completions stream with the prompt on the first choice, keeping asked-for fields", () => {
    const st = new StreamTrace("completions", { clientWantsLogprobs: true, clientWantsTokenIds: true });
    const c = (text: string, id: number, finish: string | null, prompt?: number[]): object => ({
      index: 0, text, logprobs: { token_logprobs: [-0.25] }, finish_reason: finish, token_ids: [id], ...(prompt ? { prompt_token_ids: prompt } : {}),
    });
    expect(st.push(env([c("x", 4, null, [9])])).choices[0].prompt_token_ids).toEqual([9]);
    st.push(env([c("y", 5, "stop")]));
    expect(st.finish()).toMatchObject({ promptTokenIds: [9], outputTokenIds: [4, 5], outputText: "xy", finishReason: "stop" });
  });

  it("refuses streams it cannot trace", () => {
    const noIds = new StreamTrace("chat", { clientWantsLogprobs: false, clientWantsTokenIds: false });
    noIds.push(env([{ index: 0, delta: { content: "a" }, logprobs: null, finish_reason: "stop" }], { prompt_token_ids: [1] }));
    expect(() => noIds.finish()).toThrow(/no choices\[0\]\.token_ids/);
    const noFinish = new StreamTrace("chat", { clientWantsLogprobs: false, clientWantsTokenIds: false });
    noFinish.push(env([tok("a", 7, -0.5)], { prompt_token_ids: [1] }));
    expect(() => noFinish.finish()).toThrow("streamed no finish_reason before [DONE]");
    const noLogprobs = new StreamTrace("chat", { clientWantsLogprobs: false, clientWantsTokenIds: false });
    noLogprobs.push(env([{ index: 0, delta: { content: "a" }, finish_reason: "stop", token_ids: [3] }], { prompt_token_ids: [1] }));
    expect(() => noLogprobs.finish()).toThrow("returned 0 logprobs for 1 output tokens");
    expect(() => noIds.push(env([{ index: 1 }]))).toThrow(TraceShapeError);
    expect(() => noIds.push("x")).toThrow("not a JSON object");
  });
});
