// Speculative decoding on the cost model: acceptance fitted to a measured mean acceptance length,
// verification charged by the profile as a decode chunk of 1 + k tokens, the same tokens with and without
// speculation, and — through the real scheduler and the adaptive budget, on Llama-3-8B/H100 timing —
// speculation paying off for a lone long-tail request and cut back for a large batch.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { Rng } from "../../core/rng.js";
import { KvBlockManager } from "../kv/block-manager.js";
import { Scheduler } from "../scheduler/scheduler.js";
import type { StepPlan } from "../scheduler/step-plan.js";
import { DraftBudget } from "../specdec/draft-budget.js";
import { acceptanceForMeanLength, CostModelExecutor, type ModelledSpeculation } from "./costmodel-executor.js";
import { LLAMA3_8B_H100 } from "./profile.js";
import { stepTimeBreakdown } from "./step-time.js";

const STOP = 0;

describe("acceptanceForMeanLength", () => {
  it("gives the rate p with 1 + Σ p^i = the measured mean length", () => {
    for (const [mean, k] of [
      [1.7, 8],
      [2.85, 8],
      [1.38, 4],
    ] as const) {
      const p = acceptanceForMeanLength(mean, k);
      let len = 1;
      for (let i = 1; i <= k; i++) len += p ** i;
      expect(len).toBeCloseTo(mean, 9);
    }
    expect(acceptanceForMeanLength(1, 4)).toBeCloseTo(0, 9);
    expect(acceptanceForMeanLength(5, 4)).toBeCloseTo(1, 9);
    expect(() => acceptanceForMeanLength(6, 4)).toThrow(/mean acceptance length with 4 draft tokens is in \[1, 5\], got 6/);
    expect(() => acceptanceForMeanLength(2, 0)).toThrow(/maxSpecTokens must be an integer >= 1/);
  });
});

describe("cost-model verification", () => {
  it("charges a verification as a decode of 1 + k tokens that streams the KV once", () => {
    const plan = (chunks: StepPlan["chunks"]): StepPlan => ({ stepId: 0, now: 0, chunks, numBatchedTokens: 0, preempted: [], finished: [], transfers: [] });
    const plain = stepTimeBreakdown(LLAMA3_8B_H100, plan([{ requestId: "a", numNewTokens: 1, numComputedTokens: 99, samples: true }]), () => 100);
    const verify = stepTimeBreakdown(LLAMA3_8B_H100, plan([{ requestId: "a", numNewTokens: 5, numComputedTokens: 99, samples: true, draftTokenIds: [1, 2, 3, 4] }]), () => 100);
    expect(verify.baseMs).toBe(plain.baseMs); // a decode pass, not a prefill's base
    expect(verify.prefillMs).toBe(0);
    expect(verify.decodeMs).toBeCloseTo(5 * plain.decodeMs, 12);
    expect(verify.attentionMs).toBe(plain.attentionMs);
    expect(verify.mlpMs).toBe(plain.mlpMs); // 5 tokens stay under the memory-bound threshold
  });

  it("accepts draft runs at the modelled rate and samples the same tokens as without speculation", () => {
    const rate = 0.6;
    const spec: ModelledSpeculation = { maxSpecTokens: 4, acceptance: [rate] };
    const plain = new CostModelExecutor(LLAMA3_8B_H100, new Rng(3), { vocabSize: 1000, stopTokenIds: [STOP] });
    const fast = new CostModelExecutor(LLAMA3_8B_H100, new Rng(3), { vocabSize: 1000, stopTokenIds: [STOP], speculation: spec });
    const chunk = (draft: boolean) => ({ requestId: "r", numNewTokens: draft ? 5 : 1, numComputedTokens: 10, samples: true, ...(draft ? { draftTokenIds: [1, 1, 1, 1] } : {}) });
    const step = (e: CostModelExecutor, draft: boolean) => e.run({ stepId: 0, now: 0, chunks: [chunk(draft)], numBatchedTokens: 0, preempted: [], finished: [], transfers: [] }, () => 10);
    const a: number[] = [];
    const b: number[] = [];
    let drafts = 0;
    let accepted = 0;
    while (a.length < 4000) {
      const r = step(fast, true);
      expect(r.drafts?.get("r")).toEqual([1, 1, 1, 1]);
      const more = r.moreTokens?.get("r") ?? [];
      drafts++;
      accepted += more.length;
      a.push(r.sampled.get("r")!.tokenId, ...more.map((t) => t.tokenId));
    }
    while (b.length < a.length) b.push(step(plain, false).sampled.get("r")!.tokenId);
    expect(a).toEqual(b);
    // E[accepted of 4] = 0.6 + 0.36 + 0.216 + 0.1296 = 1.3056.
    expect(accepted / drafts).toBeGreaterThan(1.3056 - 0.1);
    expect(accepted / drafts).toBeLessThan(1.3056 + 0.1);
    expect(() => new CostModelExecutor(LLAMA3_8B_H100, new Rng(3), { vocabSize: 10, stopTokenIds: [STOP], speculation: { maxSpecTokens: 2, acceptance: [1.5] } })).toThrow(
      /speculation\.acceptance must be a non-empty list of rates in \[0, 1\]/,
    );
  });
});

/** `n` requests of 512-token prompts and 256-token outputs on one simulated engine: modelled makespan and tokens. */
function simulate(n: number, spec: "none" | "full" | "adaptive"): { ms: number; outputs: number[][]; draftTokens: number } {
  const clock = new VirtualClock();
  const kv = new KvBlockManager({ blockSize: 16, numBlocks: 20_000, enablePrefixCaching: true, bytesPerToken: LLAMA3_8B_H100.kvBytesPerToken });
  const budget = spec === "adaptive" ? new DraftBudget({ maxPositions: 6 }) : undefined;
  const sched = new Scheduler({ maxNumBatchedTokens: 8192, maxNumSeqs: 512, policy: "fcfs", enableChunkedPrefill: true, maxModelLen: 2048, stopTokenIds: [STOP], maxWaiting: 10_000 }, kv, clock, budget);
  const speculation = { maxSpecTokens: 6, acceptance: [acceptanceForMeanLength(2.85, 6)] };
  const exec = new CostModelExecutor(LLAMA3_8B_H100, new Rng(11), { vocabSize: 128_256, stopTokenIds: [STOP], ...(spec !== "none" ? { speculation } : {}) });
  const rng = new Rng(5);
  for (let i = 0; i < n; i++) {
    const id = `r${i}`;
    sched.addRequest({ requestId: id, promptTokenIds: Array.from({ length: 512 }, () => rng.int(1, 128_000)), maxTokens: 300 });
    exec.setOutputLength(id, 256);
  }
  const outputs = new Map<string, number[]>();
  let draftTokens = 0;
  for (let steps = 0; sched.hasUnfinished(); steps++) {
    if (steps > 100_000) throw new Error("simulation did not finish");
    const plan = sched.schedule();
    for (const c of plan.chunks) draftTokens += c.draftTokenIds?.length ?? 0;
    const result = exec.run(plan, (id) => kv.numTokensOf(id));
    clock.advance(result.durationMs);
    for (const f of sched.onStepDone(result)) outputs.set(f.requestId, f.outputTokenIds);
  }
  return { ms: clock.now(), outputs: [...outputs.entries()].sort().map(([, o]) => o), draftTokens };
}

describe("speculation through the scheduler on Llama-3-8B/H100 timing", () => {
  it("pays off for a lone request; for a large batch the adaptive budget verifies far fewer drafts and beats both", () => {
    const one = { none: simulate(1, "none"), full: simulate(1, "full"), adaptive: simulate(1, "adaptive") };
    expect(one.full.outputs).toEqual(one.none.outputs);
    expect(one.adaptive.outputs).toEqual(one.none.outputs);
    // Decode is memory bound at batch 1: verifying 6 drafts costs about one step and gives ~2.85 tokens.
    expect(one.full.ms).toBeLessThan(one.none.ms * 0.6);
    expect(one.adaptive.ms).toBeLessThan(one.none.ms * 0.6);

    const many = { none: simulate(384, "none"), full: simulate(384, "full"), adaptive: simulate(384, "adaptive") };
    expect(many.full.outputs).toEqual(many.none.outputs);
    // 384 × 7 tokens a step is far past the compute-bound threshold: full drafts cost more than they give
    // (modelled: 58.9 s vs 57.6 s)…
    expect(many.full.ms).toBeGreaterThan(many.none.ms);
    // …and the budget verifies a fraction of the draft tokens, finishing before both.
    expect(many.adaptive.outputs).toEqual(many.none.outputs);
    expect(many.adaptive.draftTokens).toBeLessThan(many.full.draftTokens / 2);
    expect(many.adaptive.ms).toBeLessThan(many.none.ms);
    expect(many.adaptive.ms).toBeLessThan(many.full.ms);
  });
});
