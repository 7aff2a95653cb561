// The adaptive draft budget on hand-worked numbers: acceptance counts per position, the step-time
// fit, the marginal rule g·T(n) > E·b, the step's token room (longest requests first) and exploration.
import { describe, expect, it } from "vitest";
import { DraftBudget } from "./draft-budget.js";

/** A budget whose step-time fit is exactly T(n) = a + b·n, with acceptance 0.8 at positions 1 and 2. */
function fitted(a: number, b: number, o: ConstructorParameters<typeof DraftBudget>[0] = {}): DraftBudget {
  const d = new DraftBudget({ decay: 1, exploreEvery: 0, ...o });
  for (let n = 1; n <= 8; n++) d.observeStep(n, a + b * n);
  // Three drafts of 2 tokens, all accepted: positions 1 and 2 at (3 + 1) / (3 + 2) = 0.8; position 3 at the prior 0.5.
  for (let i = 0; i < 3; i++) d.observeDraft(2, 2);
  return d;
}

const cand = (requestId: string, available: number, outputTokens = 10) => ({ requestId, available, outputTokens });

describe("DraftBudget", () => {
  it("counts acceptance per position: reached and accepted, with a Beta(1,1) prior", () => {
    const d = new DraftBudget({ decay: 1 });
    expect(d.acceptance(1)).toBe(0.5);
    d.observeDraft(4, 2); // positions 1, 2 accepted; 3 reached and rejected; 4 never reached
    expect(d.acceptance(1)).toBeCloseTo(2 / 3, 12);
    expect(d.acceptance(2)).toBeCloseTo(2 / 3, 12);
    expect(d.acceptance(3)).toBeCloseTo(1 / 3, 12);
    expect(d.acceptance(4)).toBe(0.5);
    // Decay forgets: with 0.5 per draft, an old acceptance weighs half after the next draft.
    const f = new DraftBudget({ decay: 0.5 });
    f.observeDraft(1, 1);
    f.observeDraft(1, 0);
    // reached 0.5 + 1 = 1.5, accepted 0.5: (0.5 + 1) / (1.5 + 2)
    expect(f.acceptance(1)).toBeCloseTo(1.5 / 3.5, 12);
    // Positions past maxPositions share the last one's counts.
    const short = new DraftBudget({ decay: 1, maxPositions: 2 });
    short.observeDraft(5, 5);
    expect(short.acceptance(9)).toBe(short.acceptance(2));
    expect(short.acceptance(2)).toBeCloseTo(5 / 6, 12); // position 2 reached 4 times (2..5), all accepted
  });

  it("fits step time by least squares once it has enough distinct points", () => {
    const d = new DraftBudget({ minSteps: 3 });
    d.observeStep(4, 13);
    d.observeStep(4, 13);
    d.observeStep(4, 13);
    expect(d.fit()).toBeUndefined(); // no spread in tokens
    d.observeStep(8, 21);
    expect(d.fit()?.slopeMs).toBeCloseTo(2, 12);
    expect(d.fit()?.interceptMs).toBeCloseTo(5, 12);
    // A falling line is noise, not a model.
    const n = new DraftBudget({ minSteps: 2 });
    n.observeStep(1, 10);
    n.observeStep(5, 2);
    expect(n.fit()).toBeUndefined();
    // The window keeps the latest steps only.
    const w = new DraftBudget({ minSteps: 2, window: 2 });
    w.observeStep(1, 100);
    w.observeStep(1, 3);
    w.observeStep(2, 4);
    expect(w.fit()).toEqual({ interceptMs: 2, slopeMs: 1 });
  });

  it("a lone request on a fixed-cost step speculates deeply (g·T(n) > E·b)", () => {
    // T(n) = 9 + n. Gains 0.8, 0.64, 0.32: 0.8·10 > 1; 0.64·11 > 1.8; 0.32·12 = 3.84 > 2.44 → all three.
    expect(fitted(9, 1).plan([cand("a", 3)], 1, 1)).toEqual(new Map([["a", 3]]));
    // T(n) = 9 + 2n: 0.8·11 > 1·2; 0.64·13 > 1.8·2; 0.32·15 = 4.8 < 2.44·2 = 4.88 → two.
    expect(fitted(9, 2).plan([cand("a", 3)], 1, 1)).toEqual(new Map([["a", 2]]));
  });

  it("a large batch speculates less, and a compute-bound step not at all", () => {
    // 16 requests, T(n) = 9 + n: position 1 for all (0.8·25 = 20 > 16, and both sides grow by 0.8 per
    // token); position 2: 0.64·(9 + 32) = 26.24 < 28.8 → none.
    const sixteen = Array.from({ length: 16 }, (_, i) => cand(`r${i}`, 3));
    const plan = fitted(9, 1).plan(sixteen, 16, 16);
    expect([...plan.values()]).toEqual(new Array(16).fill(1));
    // T(n) = 0.1 + n: 0.8·1.1 = 0.88 < 1 → nothing.
    expect(fitted(0.1, 1).plan([cand("a", 3)], 1, 1).size).toBe(0);
  });

  it("gives the step's remaining token room to the longest requests first", () => {
    const plan = fitted(9, 1).plan([cand("short", 3, 5), cand("long", 3, 500), cand("mid", 3, 50)], 3, 3, 4);
    // Position 1 for long, mid, short (3 tokens), then position 2 for long (the 4th): room spent.
    expect(plan).toEqual(new Map([["long", 2], ["mid", 1], ["short", 1]]));
  });

  it("verifies every draft in full before the fit exists and on every exploreEvery-th step after", () => {
    const fresh = new DraftBudget();
    expect(fresh.plan([cand("a", 5), cand("b", 2)], 2, 2)).toEqual(new Map([["a", 5], ["b", 2]]));
    // Room still binds while exploring: the longest request first.
    expect(fresh.plan([cand("a", 5, 1), cand("b", 2, 9)], 2, 2, 3)).toEqual(new Map([["b", 2], ["a", 1]]));
    const d = fitted(0.1, 1, { exploreEvery: 3 });
    const sizes = Array.from({ length: 6 }, () => d.plan([cand("a", 4)], 1, 1).get("a") ?? 0);
    expect(sizes).toEqual([0, 0, 4, 0, 0, 4]);
  });

  it("refuses bad options", () => {
    expect(() => new DraftBudget({ window: 1 })).toThrow(/window must be an integer >= 2/);
    expect(() => new DraftBudget({ decay: 0 })).toThrow(/decay must be in \(0, 1\]/);
    expect(() => new DraftBudget({ minSteps: 10, window: 4 })).toThrow(/minSteps 10 exceeds window 4/);
  });
});
