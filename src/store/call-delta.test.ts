import { describe, expect, it } from "vitest";
import { resolveCalls, type DeltaCallRow } from "./call-delta.js";
import { CallContexts, contextOf, deltaOver } from "./call-contexts.mjs";
import { encodeFloat64s, encodeTokenIds } from "./codec.js";

const ids = (xs: number[]): Int32Array => Int32Array.from(xs);

/** A calls row of program p (whole unless `base` is given). */
function row(idx: number, prompt: number[], output: number[], messages: unknown[], base?: { idx: number; prompt: number; messages: number }): DeltaCallRow {
  return {
    id: `c${idx}`,
    program_id: "p",
    idx,
    messages: JSON.stringify(messages),
    prompt_token_ids: encodeTokenIds(prompt, "prompt"),
    output_token_ids: encodeTokenIds(output, "output"),
    logprobs: encodeFloat64s(output.map(() => -1), "logprobs"),
    output_text: "",
    finish_reason: "stop",
    backend: "b",
    policy_version: 0,
    start_ms: 0,
    end_ms: 1,
    trainable: 1,
    context_reset: 0,
    token_policy_versions: null,
    served_model: null,
    context_reset_reason: null,
    requested_model: null,
    max_tokens_asked: null,
    max_tokens_granted: null,
    base_idx: base?.idx ?? null,
    prompt_shared: base?.prompt ?? 0,
    messages_shared: base?.messages ?? 0,
  };
}

describe("call deltas", () => {
  it("takes a call over its base: the shared prompt ids (into the base's output) and leading messages", () => {
    const base = contextOf(0, ids([1, 2]), ids([3]), ['{"a":1}']);
    const d = deltaOver(base, ids([1, 2, 3, 9]), ['{"a":1}', '{"b":2}']);
    expect(d).toMatchObject({ baseIdx: 0, promptShared: 3, messagesShared: 1, messagesRest: '[{"b":2}]' });
    expect([...d.promptRest]).toEqual([9]);
    // Nothing shared: whole, with no base to depend on.
    const whole = deltaOver(base, ids([7]), ['{"c":3}']);
    expect(whole.baseIdx).toBeNull();
    expect(whole.messagesRest).toBe('[{"c":3}]');
  });

  it("rebuilds calls over bases in any order, and names a cycle and a base shorter than what is shared", () => {
    const m0 = { role: "user", content: "q" };
    const rows = [
      row(0, [9], [8], [m0], { idx: 1, prompt: 2, messages: 1 }),
      row(1, [1, 2], [3], [m0]),
    ];
    const [c0, c1] = resolveCalls(rows);
    expect(c0?.promptTokenIds).toEqual([1, 2, 9]);
    expect(c0?.messages).toEqual([m0, m0]);
    expect(c1?.promptTokenIds).toEqual([1, 2]);
    const cycle = [row(0, [], [1], [], { idx: 1, prompt: 0, messages: 0 }), row(1, [], [1], [], { idx: 0, prompt: 0, messages: 0 })];
    expect(() => resolveCalls(cycle)).toThrow("store: call 'c1' (program 'p', index 1) is corrupt: its base call 0 is in a cycle");
    const tooMuch = [row(0, [1], [2], []), row(1, [], [], [], { idx: 0, prompt: 3, messages: 0 })];
    expect(() => resolveCalls(tooMuch)).toThrow("index 1) is corrupt: it shares more of call 0 than that call holds");
  });

  it("keeps the last call of at most maxPrograms programs and maxBytes, the oldest going first", () => {
    const ctx = (index: number, n: number) => contextOf(index, new Int32Array(n), new Int32Array(0), []);
    const byCount = new CallContexts(2, 1 << 20);
    byCount.set("a", ctx(0, 1));
    byCount.set("b", ctx(0, 1));
    byCount.set("a", ctx(1, 1));
    byCount.set("c", ctx(0, 1));
    expect([byCount.get("a")?.index, byCount.get("b"), byCount.get("c")?.index]).toEqual([1, undefined, 0]);
    const byBytes = new CallContexts(10, 100);
    byBytes.set("a", ctx(0, 10));
    byBytes.set("b", ctx(0, 10));
    byBytes.set("c", ctx(0, 10));
    expect([byBytes.get("a"), byBytes.get("b")?.index, byBytes.get("c")?.index]).toEqual([undefined, 0, 0]);
    // One too large for the bound alone is not kept, and evicts nothing.
    byBytes.set("d", ctx(0, 30));
    expect(byBytes.get("d")).toBeUndefined();
    expect(byBytes.size).toBe(2);
    byBytes.clear();
    expect(byBytes.size).toBe(0);
  });
});
