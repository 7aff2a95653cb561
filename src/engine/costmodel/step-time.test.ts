import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { KvTransfer, ScheduledChunk, StepPlan } from "../scheduler/step-plan.js";
import { COST_PROFILES } from "./profile.js";
import { mlpTimeMs, stepTimeBreakdown, stepTimeMs } from "./step-time.js";
import { ROUND_PROFILE as P } from "../../testing/costmodel-helpers.js";

function plan(chunks: ScheduledChunk[], transfers: KvTransfer[] = []): StepPlan {
  const numBatchedTokens = chunks.reduce((s, c) => s + c.numNewTokens, 0);
  return { stepId: 1, now: 0, chunks, numBatchedTokens, preempted: [], finished: [], transfers };
}
const prefill = (id: string, n: number, computed = 0): ScheduledChunk => ({
  requestId: id,
  numNewTokens: n,
  numComputedTokens: computed,
  samples: true,
});
const decode = (id: string, computed: number): ScheduledChunk => ({
  requestId: id,
  numNewTokens: 1,
  numComputedTokens: computed,
  samples: true,
});

describe("stepTimeMs on hand-worked cases", () => {
  it("an empty step takes no time", () => {
    expect(stepTimeMs(P, plan([]))).toBe(0);
  });

  it("prefill: base + per token + MLP floor below the threshold", () => {
    // 10 + 3 × 1 + 2
    expect(stepTimeMs(P, plan([prefill("a", 3)]))).toBeCloseTo(15, 12);
  });

  it("prefill past the threshold pays compute-bound MLP and reads its cached prefix", () => {
    // 10 + 6 × 1 + 100 × 0.01 + (2 + 0.1 × (6 − 4))
    const b = stepTimeBreakdown(P, plan([prefill("a", 6, 100)]));
    expect(b).toMatchObject({ baseMs: 10, prefillMs: 6, decodeMs: 0, transferMs: 0 });
    expect(b.attentionMs).toBeCloseTo(1, 12);
    expect(b.mlpMs).toBeCloseTo(2.2, 12);
    expect(b.totalMs).toBeCloseTo(19.2, 12);
  });

  it("decode: base + per sequence + attention over the KV after the step + MLP", () => {
    // 4 + 2 × 0.5 + (100 + 300) × 0.01 + 2: 99 and 299 tokens computed, one new token each
    expect(stepTimeMs(P, plan([decode("a", 99), decode("b", 299)]))).toBeCloseTo(11, 12);
  });

  it("a mixed step pays one base (the larger) and one MLP over all tokens", () => {
    // max(10, 4) + 3 × 1 + 0.5 + 100 × 0.01 + mlp(4) = 2
    expect(stepTimeMs(P, plan([prefill("a", 3), decode("b", 99)]))).toBeCloseTo(16.5, 12);
  });

  it("charges KV transfers by the bandwidth of the tier crossed", () => {
    const t: KvTransfer[] = [
      { from: "L1", to: "L2", blocks: 1, bytes: 5000 }, // store 5000 / 1000
      { from: "L3", to: "L1", blocks: 1, bytes: 500 }, // load 500 / 100
      { from: "L1", to: "L3", blocks: 1, bytes: 100 }, // store 100 / 100
    ];
    // With nothing to compute the step lasts as long as the longer of the load and the stores: max(5, 5 + 1).
    expect(stepTimeBreakdown(P, plan([], t))).toMatchObject({ loadMs: 5, storeMs: 6, transferMs: 6, totalMs: 6 });
  });

  it("a load adds its whole time to the forward pass; stores cost only what the pass does not cover", () => {
    const load: KvTransfer = { from: "L2", to: "L1", blocks: 1, bytes: 3000 }; // 3 ms
    const store = (bytes: number): KvTransfer => ({ from: "L1", to: "L2", blocks: 1, bytes });
    // The prefill alone: 10 + 3 × 1 + 2 = 15 ms.
    expect(stepTimeMs(P, plan([prefill("a", 3)], [load]))).toBeCloseTo(18, 12);
    expect(stepTimeMs(P, plan([prefill("a", 3)], [store(12_000)]))).toBeCloseTo(15, 12);
    const b = stepTimeBreakdown(P, plan([prefill("a", 3)], [load, store(20_000)]));
    expect(b).toMatchObject({ loadMs: 3, storeMs: 20, totalMs: 20 });
    expect(b.transferMs).toBeCloseTo(5, 12);
  });

  it("mlpTimeMs is flat up to the threshold, then linear", () => {
    expect([0, 1, 4, 5, 14].map((n) => mlpTimeMs(P, n))).toEqual([0, 2, 2, 2.1, 3]);
  });

  it("rejects malformed chunks and transfers with the field named", () => {
    expect(() => stepTimeMs(P, plan([prefill("a", 0)]))).toThrow(/a\.numNewTokens/);
    expect(() => stepTimeMs(P, plan([prefill("a", 2, -1)]))).toThrow(/a\.numComputedTokens/);
    expect(() => stepTimeMs(P, plan([], [{ from: "L1", to: "L1", blocks: 1, bytes: 1 }]))).toThrow(/itself/);
    expect(() => stepTimeMs(P, plan([], [{ from: "L1", to: "L2", blocks: 1, bytes: -1 }]))).toThrow(/bytes/);
  });
});

describe("stepTimeMs monotonicity (fast-check)", () => {
  const profiles = [P, ...Object.values(COST_PROFILES)];
  const arbChunk = fc.oneof(
    fc.record({ kind: fc.constant("decode" as const), kv: fc.integer({ min: 1, max: 200_000 }) }),
    fc.record({
      kind: fc.constant("prefill" as const),
      n: fc.integer({ min: 2, max: 8192 }),
      computed: fc.integer({ min: 0, max: 100_000 }),
    }),
  );
  type ArbChunk = { kind: "decode"; kv: number } | { kind: "prefill"; n: number; computed: number };
  const toChunk = (c: ArbChunk, i: number): ScheduledChunk =>
    c.kind === "decode" ? decode(`r${i}`, c.kv) : prefill(`r${i}`, c.n, c.computed);
  const time = (p: (typeof profiles)[number], cs: ArbChunk[], transferBytes = 0): number => {
    const transfers: KvTransfer[] =
      transferBytes > 0 ? [{ from: "L2", to: "L1", blocks: 1, bytes: transferBytes }, { from: "L1", to: "L3", blocks: 1, bytes: transferBytes / 2 }] : [];
    return stepTimeMs(p, plan(cs.map(toChunk), transfers), );
  };
  const arbProfile = fc.constantFrom(...profiles);
  const arbBatch = fc.array(arbChunk, { maxLength: 64 });

  it("adding a sequence to the batch never makes the step faster", () => {
    fc.assert(
      fc.property(arbProfile, arbBatch, arbChunk, (p, cs, extra) => {
        expect(time(p, [...cs, extra])).toBeGreaterThanOrEqual(time(p, cs));
      }),
    );
  });

  it("a longer prompt chunk or a longer KV never makes the step faster", () => {
    fc.assert(
      fc.property(arbProfile, fc.array(arbChunk, { minLength: 1, maxLength: 64 }), fc.nat(), fc.integer({ min: 1, max: 4096 }), (p, cs, pick, grow) => {
        const i = pick % cs.length;
        const c = cs[i] as ArbChunk;
        const bigger: ArbChunk = c.kind === "decode" ? { ...c, kv: c.kv + grow } : { ...c, n: c.n + grow };
        const more = cs.map((x, j) => (j === i ? bigger : x));
        expect(time(p, more)).toBeGreaterThanOrEqual(time(p, cs));
        if (c.kind === "prefill") {
          const cached = cs.map((x, j) => (j === i ? { ...c, computed: c.computed + grow } : x));
          expect(time(p, cached)).toBeGreaterThanOrEqual(time(p, cs));
        }
      }),
    );
  });

  it("more KV transfer bytes never make the step faster", () => {
    fc.assert(
      fc.property(arbProfile, arbBatch, fc.nat({ max: 1e9 }), fc.nat({ max: 1e9 }), (p, cs, a, b) => {
        expect(time(p, cs, a + b)).toBeGreaterThanOrEqual(time(p, cs, a));
      }),
    );
  });
});
