// The scheduler's side of speculative decoding: drafts reported by a step are planned into the
// request's next decode chunk (KV slots and budget included, clipped to max_tokens and the model
// length), a verified run appends several tokens (cut at a stop or a length cap), and the
// positions of rejected draft tokens give their KV slots back.
import { describe, expect, it } from "vitest";
import { makeHarness, toks } from "../../testing/scheduler-helpers.js";
import { DraftBudget } from "../specdec/draft-budget.js";
import type { FinishedRequest } from "./scheduler.js";
import type { SampledTokenOut, StepPlan } from "./step-plan.js";

type H = ReturnType<typeof makeHarness>;

/** One step: `emit` gives each sampling request's tokens (first, then the run), `drafts` its next draft. */
function step(
  h: H,
  emit: (c: StepPlan["chunks"][number]) => number[],
  drafts: Record<string, number[]> = {},
  durationMs: (plan: StepPlan) => number = () => 1,
): { plan: StepPlan; finished: FinishedRequest[] } {
  const plan = h.sched.schedule();
  h.kv.checkInvariants();
  const sampled: (SampledTokenOut | undefined)[] = [];
  const moreTokens: (SampledTokenOut[] | undefined)[] = [];
  for (const c of plan.chunks) {
    const [first, ...rest] = c.samples ? emit(c).map((tokenId) => ({ tokenId, logprob: -0.5 })) : [];
    sampled.push(first);
    moreTokens.push(rest.length > 0 ? rest : undefined);
  }
  const next = plan.chunks.map((c) => drafts[c.requestId]);
  const finished = h.sched.onStepDone({ stepId: plan.stepId, sampled, moreTokens, drafts: next, durationMs: durationMs(plan) });
  h.kv.checkInvariants();
  return { plan, finished };
}

describe("scheduler: speculative decoding", () => {
  it("plans a reported draft into the next decode chunk, then keeps the KV of the accepted tokens only", () => {
    const h = makeHarness();
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(10), maxTokens: 20 });
    step(h, () => [50], { a: [51, 52, 53, 54] });
    const { plan } = step(h, (c) => {
      expect(c).toEqual({ requestId: "a", numNewTokens: 5, numComputedTokens: 10, samples: true, draftTokenIds: [51, 52, 53, 54] });
      // The step holds KV slots for the last token and the 4 draft tokens.
      expect(h.kv.numTokensOf("a")).toBe(15);
      return [51, 52, 60]; // two accepted, the third rejected: the target's own token follows
    });
    expect(plan.numBatchedTokens).toBe(5);
    const st = h.sched.requestState("a")!;
    expect(st.outputTokenIds).toEqual([50, 51, 52, 60]);
    // Computed: prompt, 50, 51, 52 — the rejected positions' slots are given back.
    expect(st.numComputedTokens).toBe(13);
    expect(h.kv.numTokensOf("a")).toBe(13);
    expect(h.kv.blocksOf("a")).toHaveLength(4);
    // No draft reported: the next step is a plain decode of the last token.
    expect(step(h, () => [61]).plan.chunks[0]).toEqual({ requestId: "a", numNewTokens: 1, numComputedTokens: 13, samples: true });
  });

  it("clips a draft to max_tokens, the step's budget and the model length", () => {
    const long = [101, 102, 103, 104, 105, 106, 107, 108];
    const h = makeHarness();
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 4 });
    step(h, () => [50], { a: long });
    // 1 output so far, max 4: a run may emit 3 more, so 2 draft tokens and the target's token.
    expect(step(h, () => [101, 102, 103]).plan.chunks[0]!.draftTokenIds).toEqual([101, 102]);
    expect(h.sched.requestState("a")?.finishReason).toBe("length");

    const budget = makeHarness({ maxNumBatchedTokens: 6 });
    budget.sched.addRequest({ requestId: "b", promptTokenIds: toks(4), maxTokens: 50 });
    step(budget, () => [50], { b: long });
    // A budget of 6 tokens: the last token and 5 draft tokens.
    expect(step(budget, () => [70]).plan.chunks[0]!.draftTokenIds).toEqual(long.slice(0, 5));

    const model = makeHarness({ maxModelLen: 20 });
    model.sched.addRequest({ requestId: "c", promptTokenIds: toks(16), maxTokens: 50 });
    step(model, () => [50], { c: long });
    // 17 tokens, 16 computed; a run ends by 20 tokens: 2 draft tokens and the target's token.
    expect(step(model, () => [101, 102, 103]).plan.chunks[0]!.draftTokenIds).toEqual([101, 102]);
    expect(model.sched.requestState("c")).toMatchObject({ finishReason: "length", outputTokenIds: [50, 101, 102, 103] });
  });

  it("ends at a stop token or the length cap inside a verified run and drops the tokens after it", () => {
    const h = makeHarness();
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(6), maxTokens: 30 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(6, 300), maxTokens: 4 });
    step(h, () => [50], { a: [51, 0, 52, 53], b: [61, 62, 63] });
    const { finished } = step(h, (c) => (c.requestId === "a" ? [51, 0, 52, 53, 54] : [61, 62, 63]));
    const byId = Object.fromEntries(finished.map((f) => [f.requestId, f]));
    expect(byId["a"]).toMatchObject({ outputTokenIds: [50, 51, 0], finishReason: "stop", stopTokenId: 0, logprobs: [-0.5, -0.5, -0.5] });
    // b's draft was clipped to 2 (max_tokens 4, one output): the run ends at the cap.
    expect(byId["b"]).toMatchObject({ outputTokenIds: [50, 61, 62, 63], finishReason: "length" });
    expect(h.kv.numTokensOf("a")).toBe(0);
  });

  it("refuses a result with more tokens than the draft allows, leaving the scheduler as it was", () => {
    const h = makeHarness();
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(6), maxTokens: 30 });
    step(h, () => [50], { a: [51] });
    const plan = h.sched.schedule();
    const more = [[52, 53].map((tokenId) => ({ tokenId, logprob: 0 }))];
    expect(() => h.sched.onStepDone({ stepId: plan.stepId, sampled: [{ tokenId: 51, logprob: 0 }], moreTokens: more, durationMs: 1 })).toThrow(/3 tokens for request a, more than its 1 draft tokens \+ 1/);
    expect(h.sched.requestState("a")?.outputTokenIds).toEqual([50]);
  });

  it("forgets a preempted request's draft: it is recomputed from its tokens", () => {
    // 6 blocks of 4: a and b (8 prompt tokens each) take 2 each; a's verification step takes the
    // other 2 (14 tokens), so b's (14 too) preempts b.
    const h = makeHarness({ maxModelLen: 20 }, { numBlocks: 6 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(8), maxTokens: 30 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(8, 300), maxTokens: 30 });
    step(h, () => [50], { a: [51, 52, 53, 54, 55], b: [61, 62, 63, 64, 65] });
    const { plan } = step(h, (c) => [c.requestId === "a" ? 51 : 61]);
    expect(plan.preempted).toEqual(["b"]);
    expect(plan.chunks.map((c) => [c.requestId, c.draftTokenIds])).toEqual([["a", [51, 52, 53, 54, 55]]]);
    // b comes back with its prompt and output computed again, and no draft.
    let back: StepPlan | undefined;
    for (let i = 0; i < 10 && !back; i++) {
      const s = step(h, (c) => [c.requestId === "a" ? 70 + i : 80]);
      back = s.plan.chunks.some((c) => c.requestId === "b") ? s.plan : undefined;
    }
    const chunk = back!.chunks.find((c) => c.requestId === "b")!;
    expect(chunk.draftTokenIds).toBeUndefined();
    // Its prompt's blocks are prefix-cache hits; the rest is its prompt and output, no draft position.
    expect(chunk.numComputedTokens + chunk.numNewTokens).toBe(9);
  });

  it("with the adaptive budget: keeps verifying drafts where a step costs mostly its fixed part, stops where it is compute bound", () => {
    /** Steps of one request whose drafts are always accepted, timed T(n) = a + b·n; the draft lengths planned. */
    const planned = (a: number, b: number): number[] => {
      const h = makeHarness({ maxModelLen: 64 }, {}, 1, new DraftBudget({ exploreEvery: 0 }));
      h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 40 });
      const lens: number[] = [];
      for (let s = 0; s < 12 && h.sched.hasUnfinished(); s++) {
        const { plan } = step(
          h,
          (c) => [70, ...(c.draftTokenIds ?? [])].slice(0, (c.draftTokenIds?.length ?? 0) + 1),
          { a: [71, 72] },
          (p) => a + b * p.numBatchedTokens,
        );
        lens.push(plan.chunks[0]?.draftTokenIds?.length ?? 0);
      }
      return lens;
    };
    // Until 8 steps have timed it, every draft is verified (the prefill step has none).
    const fixed = planned(20, 1);
    const bound = planned(0, 1);
    expect(fixed.slice(0, 8)).toEqual([0, 2, 2, 2, 2, 2, 2, 2]);
    expect(bound.slice(0, 8)).toEqual(fixed.slice(0, 8));
    // Then a fixed-cost step keeps speculating; a compute-bound one (each draft token costs a full token) stops.
    expect(fixed.slice(8)).toEqual([2, 2, 2, 2]);
    expect(bound.slice(8)).toEqual([0, 0, 0, 0]);
  });
});
