// Speculative decoding on the cost model: acceptance fitted to a measured mean acceptance length,
// verification charged by the profile as a decode chunk of 1 + k tokens, the same tokens with and without
// speculation. Through the scheduler and the adaptive budget: bench/specdec-sim.test.ts.
import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import type { StepPlan } from "../scheduler/step-plan.js";
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
    // Attention reads the KV after the step: 99 + 1 tokens plain, 99 + 5 with 4 drafts (once, not 5 times).
    const plan = (chunks: StepPlan["chunks"]): StepPlan => ({ stepId: 0, now: 0, chunks, numBatchedTokens: 0, preempted: [], finished: [], transfers: [] });
    const plain = stepTimeBreakdown(LLAMA3_8B_H100, plan([{ requestId: "a", numNewTokens: 1, numComputedTokens: 99, samples: true }]));
    const verify = stepTimeBreakdown(LLAMA3_8B_H100, plan([{ requestId: "a", numNewTokens: 5, numComputedTokens: 99, samples: true, draftTokenIds: [1, 2, 3, 4] }]));
    expect(verify.baseMs).toBe(plain.baseMs); // a decode pass, not a prefill's base
    expect(verify.prefillMs).toBe(0);
    expect(verify.decodeMs).toBeCloseTo(5 * plain.decodeMs, 12);
    expect(verify.attentionMs).toBeCloseTo((plain.attentionMs * 104) / 100, 12);
    expect(verify.mlpMs).toBe(plain.mlpMs); // 5 tokens stay under the memory-bound threshold
  });

  it("accepts draft runs at the modelled rate and samples the same tokens as without speculation", () => {
    const rate = 0.6;
    const spec: ModelledSpeculation = { maxSpecTokens: 4, acceptance: [rate] };
    const plain = new CostModelExecutor(LLAMA3_8B_H100, new Rng(3), { vocabSize: 1000, stopTokenIds: [STOP] });
    const fast = new CostModelExecutor(LLAMA3_8B_H100, new Rng(3), { vocabSize: 1000, stopTokenIds: [STOP], speculation: spec });
    const chunk = (draft: boolean) => ({ requestId: "r", numNewTokens: draft ? 5 : 1, numComputedTokens: 10, samples: true, ...(draft ? { draftTokenIds: [1, 1, 1, 1] } : {}) });
    const step = (e: CostModelExecutor, draft: boolean) => e.run({ stepId: 0, now: 0, chunks: [chunk(draft)], numBatchedTokens: 0, preempted: [], finished: [], transfers: [] });
    const a: number[] = [];
    const b: number[] = [];
    let drafts = 0;
    let accepted = 0;
    while (a.length < 4000) {
      const r = step(fast, true);
      expect(r.drafts?.[0]).toEqual([1, 1, 1, 1]);
      const more = r.moreTokens?.[0] ?? [];
      drafts++;
      accepted += more.length;
      a.push(r.sampled[0]!.tokenId, ...more.map((t) => t.tokenId));
    }
    while (b.length < a.length) b.push(step(plain, false).sampled[0]!.tokenId);
    expect(a).toEqual(b);
    // E[accepted of 4] = 0.6 + 0.36 + 0.216 + 0.1296 = 1.3056.
    expect(accepted / drafts).toBeGreaterThan(1.3056 - 0.1);
    expect(accepted / drafts).toBeLessThan(1.3056 + 0.1);
    expect(() => new CostModelExecutor(LLAMA3_8B_H100, new Rng(3), { vocabSize: 10, stopTokenIds: [STOP], speculation: { maxSpecTokens: 2, acceptance: [1.5] } })).toThrow(
      /speculation\.acceptance must be a non-empty list of rates in \[0, 1\]/,
    );
  });
});
