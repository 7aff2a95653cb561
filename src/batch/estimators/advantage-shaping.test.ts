import { describe, expect, it } from "vitest";
import { fixtureSet, type FixtureProgram } from "../../testing/estimator-fixtures.js";
import { shapeNegative, unsolvedGroups } from "./advantage-shaping.js";
import { estimatorContract } from "./estimator.contract.js";
import { createEstimator } from "./registry.js";

// Group a: one solved program (reward 1) and three wrong ones (0). GRPO with eps 0: mean 0.25, sample std
// √(0.75/3) = 0.5, so A = (1.5, −0.5, −0.5, −0.5).
// Group b: nobody solved it; only the process reward differs (0, −0.5, 0, −0.5): mean −0.25, std √(0.25/3),
// so A = ±0.25/√(1/12) = ±√3/2 — the well-formed wrong answers get a positive advantage.
const A = Math.sqrt(3) / 2;
const programs: FixtureProgram[] = [
  { id: "a0", group: "a", reward: 1, outcome: 1, chunks: [2] },
  { id: "a1", group: "a", reward: 0, outcome: 0, chunks: [2] },
  { id: "a2", group: "a", reward: 0, outcome: 0, chunks: [2] },
  { id: "a3", group: "a", reward: 0, outcome: 0, chunks: [2] },
  { id: "b0", group: "b", reward: 0, outcome: 0, chunks: [2] },
  { id: "b1", group: "b", reward: -0.5, outcome: 0, chunks: [2] },
  { id: "b2", group: "b", reward: 0, outcome: 0, chunks: [2] },
  { id: "b3", group: "b", reward: -0.5, outcome: 0, chunks: [2] },
];

/** Each kept sample's advantage (one per program here: every token of the sample carries it) and weight, by program. */
function scored(options: Record<string, unknown>, ps: FixtureProgram[] = programs): { adv: Record<string, number>; weight: Record<string, number>; dropped: string[] } {
  const b = createEstimator("grpo", { eps: 0, ...options }).score(fixtureSet(ps));
  const model = (xs: number[], mask: number[]): number[] => xs.filter((_, i) => mask[i] === 1);
  for (const s of b.samples) expect(new Set(model(s.advantages, s.lossMask)).size).toBe(1);
  return {
    adv: Object.fromEntries(b.samples.map((s) => [s.programId, model(s.advantages, s.lossMask)[0] as number])),
    weight: Object.fromEntries(b.samples.map((s) => [s.programId, model(s.weights, s.lossMask)[0] as number])),
    dropped: b.dropped.map((d) => `${d.groupId}: ${d.reason}`),
  };
}

const close = (got: Record<string, number>, want: Record<string, number>): void => {
  expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
  for (const [k, v] of Object.entries(want)) expect(got[k]).toBeCloseTo(v, 12);
};

describe("advantage shaping (hand-worked on GRPO)", () => {
  it("without options: plain GRPO", () => {
    close(scored({}).adv, { a0: 1.5, a1: -0.5, a2: -0.5, a3: -0.5, b0: A, b1: -A, b2: A, b3: -A });
  });

  it("negativeAdvantageScale multiplies negative advantages only; the floor bounds them from below", () => {
    expect(shapeNegative(-0.5, { negativeAdvantageScale: 0.2 })).toBeCloseTo(-0.1, 15);
    expect(shapeNegative(1.5, { negativeAdvantageScale: 0.2, negativeAdvantageFloor: -0.01 })).toBe(1.5);
    expect(shapeNegative(-2, { negativeAdvantageFloor: -1 })).toBe(-1);
    expect(Object.is(shapeNegative(-3, { negativeAdvantageScale: 0 }), 0)).toBe(true);
    close(scored({ negativeAdvantageScale: 0.2 }).adv, { a0: 1.5, a1: -0.1, a2: -0.1, a3: -0.1, b0: A, b1: -0.2 * A, b2: A, b3: -0.2 * A });
    // 0.2·√3/2 = 0.173 is below the floor 0.15; 0.1 is not.
    close(scored({ negativeAdvantageScale: 0.2, negativeAdvantageFloor: -0.15 }).adv, { a0: 1.5, a1: -0.1, a2: -0.1, a3: -0.1, b0: A, b1: -0.15, b2: A, b3: -0.15 });
  });

  it("zeroAdvantageUnsolvedGroups: a group nobody solved learns nothing from form alone", () => {
    const r = scored({ zeroAdvantageUnsolvedGroups: true });
    close(r.adv, { a0: 1.5, a1: -0.5, a2: -0.5, a3: -0.5, b0: 0, b1: 0, b2: 0, b3: 0 });
    // Every sample stays in the batch (as a uniform group's would): weights 1/(2 tokens · 8 samples).
    for (const w of Object.values(r.weight)) expect(w).toBeCloseTo(1 / 16, 12);
    expect([...unsolvedGroups(fixtureSet(programs).programs)]).toEqual(["b"]);
    expect(() => scored({ zeroAdvantageUnsolvedGroups: true }, [{ id: "x", group: "g", reward: 1, chunks: [1] }])).toThrow(/zeroAdvantageUnsolvedGroups: program 'x' has no outcome reward component/);
  });

  it("positiveOnly keeps the samples with a positive advantage, reweighted over them alone", () => {
    const r = scored({ positiveOnly: true });
    close(r.adv, { a0: 1.5, b0: A, b2: A });
    // sample-mean over 3 samples of 2 tokens: 1/6 per token.
    for (const w of Object.values(r.weight)) expect(w).toBeCloseTo(1 / 6, 12);
    expect(r.dropped).toEqual([]);
    // With unsolved groups zeroed, only the solved program is learnt from and group b is reported dropped.
    const both = scored({ positiveOnly: true, zeroAdvantageUnsolvedGroups: true });
    close(both.adv, { a0: 1.5 });
    close(both.weight, { a0: 0.5 });
    expect(both.dropped).toEqual(["b: positiveOnly: no sample with a positive advantage"]);
  });

  it("positiveOnly zeroes a sample's non-positive chunks and keeps the positive ones (reward-to-go)", () => {
    // Step rewards (1, −2) and (0, 0): returns-to-go (−1, −2) and (0, 0); baseline = group mean of first returns (−0.5).
    const b = createEstimator("reward-to-go", { positiveOnly: true }).score(
      fixtureSet([
        { id: "p", group: "g", reward: -1, chunks: [1, 1], steps: [1, -2] },
        { id: "q", group: "g", reward: 0, chunks: [1, 1], steps: [0, 0] },
      ]),
    );
    const plain = createEstimator("reward-to-go").score(
      fixtureSet([
        { id: "p", group: "g", reward: -1, chunks: [1, 1], steps: [1, -2] },
        { id: "q", group: "g", reward: 0, chunks: [1, 1], steps: [0, 0] },
      ]),
    );
    const model = (s: { advantages: number[]; lossMask: number[] }): number[] => s.advantages.filter((_, i) => s.lossMask[i] === 1);
    // Whatever the estimator's own numbers, shaping keeps exactly the samples with a positive token and clamps the rest to 0.
    const plainBy = new Map(plain.samples.map((s) => [s.programId, model(s)]));
    const keptIds = [...plainBy].filter(([, a]) => a.some((x) => x > 0)).map(([id]) => id);
    expect(b.samples.map((s) => s.programId)).toEqual(keptIds);
    for (const s of b.samples) expect(model(s)).toEqual((plainBy.get(s.programId) as number[]).map((x) => (x > 0 ? x : 0)));
    expect(keptIds.length).toBeGreaterThan(0);
  });

  it("takes the estimator's own options beside the shaping ones, and names a bad shaping option", () => {
    expect(createEstimator("dapo", { epsHigh: 0.3, positiveOnly: true }).loss.epsHigh).toBe(0.3);
    expect(() => createEstimator("grpo", { negativeAdvantageScale: -1 })).toThrow(/train\.estimatorOptions\.negativeAdvantageScale: must be >= 0/);
    expect(() => createEstimator("grpo", { negativeAdvantageFloor: 1 })).toThrow(/train\.estimatorOptions\.negativeAdvantageFloor: must be <= 0/);
  });
});

// Shaped estimators keep the contract (aligned arrays, normalised weights, tree = flat loss).
estimatorContract("grpo", () => createEstimator("grpo", { negativeAdvantageScale: 0.5, negativeAdvantageFloor: -0.5 }));
estimatorContract("reward-to-go", () => createEstimator("reward-to-go", { negativeAdvantageScale: 0.25 }));
