// Each estimator against advantages and weights worked out by hand on one small batch.
// Group g: p0 r=1 (chunks of 2 and 1 tokens), p1 r=0 (3), p2 r=0 (1), p3 r=1 (2). Group h: q0, q1 both r=1 (1 token each).
import { describe, expect, it } from "vitest";
import type { ScoredSample } from "../batch-sample.js";
import { createChunkedMdp } from "./chunked-mdp.js";
import { createCispo } from "./cispo.js";
import { createDapo, overlongPenalty } from "./dapo.js";
import { createDrGrpo } from "./dr-grpo.js";
import { createGrpo } from "./grpo.js";
import { createGspo } from "./gspo.js";
import { createEstimator } from "./registry.js";
import { createRewardToGo, rewardsToGo } from "./reward-to-go.js";
import { fixtureSet, type FixtureProgram } from "../../testing/estimator-fixtures.js";

const programs: FixtureProgram[] = [
  { id: "p0", group: "g", reward: 1, chunks: [2, 1], steps: [0.25, 0] },
  { id: "p1", group: "g", reward: 0, chunks: [3] },
  { id: "p2", group: "g", reward: 0, chunks: [1] },
  { id: "p3", group: "g", reward: 1, chunks: [2] },
  { id: "q0", group: "h", reward: 1, chunks: [1] },
  { id: "q1", group: "h", reward: 1, chunks: [1] },
];

/** The model-token advantages of one sample, in order. */
function adv(samples: ScoredSample[], programId: string): number[] {
  const s = samples.find((x) => x.programId === programId) as ScoredSample;
  return s.advantages.filter((_, i) => s.lossMask[i] === 1);
}

function weights(samples: ScoredSample[], programId: string): number[] {
  const s = samples.find((x) => x.programId === programId) as ScoredSample;
  return s.weights.filter((_, i) => s.lossMask[i] === 1);
}

describe("estimators (hand-computed)", () => {
  it("GRPO: ±0.5 / (std √(1/3) = 0.57735 + 1e-6) = ±0.866024, broadcast to every call; sample-mean weights", () => {
    const { samples, dropped, loss } = createGrpo().score(fixtureSet(programs));
    expect(dropped).toEqual([]);
    adv(samples, "p0").forEach((a) => expect(a).toBeCloseTo(0.8660239, 6));
    adv(samples, "p1").forEach((a) => expect(a).toBeCloseTo(-0.8660239, 6));
    expect(adv(samples, "q0")).toEqual([0]); // all-equal group: exactly 0
    // 6 samples; p0 has 3 model tokens: 1/(3·6) = 1/18 each.
    weights(samples, "p0").forEach((w) => expect(w).toBeCloseTo(1 / 18, 12));
    expect(loss).toMatchObject({ ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2 });
  });

  it("token and chunk clip estimators dual-clip at c = 3 by default (verl's clip_ratio_c); GSPO and CISPO do not", () => {
    for (const name of ["grpo", "dr-grpo", "dapo", "reward-to-go", "chunked-mdp"]) {
      expect(createEstimator(name).loss.clipRatioC, name).toBe(3);
      expect(createEstimator(name, { clipRatioC: 5 }).loss.clipRatioC, name).toBe(5);
    }
    expect(createEstimator("gspo").loss.clipRatioC).toBeUndefined();
    expect(createEstimator("cispo").loss.clipRatioC).toBeUndefined();
    expect(() => createEstimator("grpo", { clipRatioC: 0.5 })).toThrow(/clipRatioC must be a finite number > 1/);
  });

  it("Dr.GRPO: r − mean = ±0.5, weight 1/(N·C) = 1/(6·10)", () => {
    const { samples } = createDrGrpo({ maxTokens: 10 }).score(fixtureSet(programs));
    expect(adv(samples, "p0")).toEqual([0.5, 0.5, 0.5]);
    expect(adv(samples, "p2")).toEqual([-0.5]);
    weights(samples, "p1").forEach((w) => expect(w).toBeCloseTo(1 / 60, 12));
  });

  it("DAPO: drops the uniform group, shapes overlong outputs, token-mean weights", () => {
    // L_max 4, L_cache 2: p1's 3-token call → (4−2−3)/2 = −0.5, so shaped rewards are [1, −0.5, 0, 1]:
    // mean 0.375, deviations [0.625, −0.875, −0.375, 0.625], Σsq = 1.6875, /3 = 0.5625, std 0.75
    // → Â = [0.833333, −1.166667, −0.5, 0.833333]. Kept tokens: 3+3+1+2 = 9 → weight 1/9.
    const { samples, dropped, loss } = createDapo({ maxTokens: 4, overlongCache: 2 }).score(fixtureSet(programs));
    expect(dropped).toEqual([{ groupId: "h", reason: "all 2 rewards equal 1: no learning signal", programs: 2 }]);
    expect(samples.map((s) => s.programId)).toEqual(["p0", "p1", "p2", "p3"]);
    expect(adv(samples, "p0")[0]).toBeCloseTo(0.8333333, 5);
    expect(adv(samples, "p1")[0]).toBeCloseTo(-1.1666667, 5);
    expect(adv(samples, "p2")[0]).toBeCloseTo(-0.5, 5);
    weights(samples, "p3").forEach((w) => expect(w).toBeCloseTo(1 / 9, 12));
    expect(loss).toMatchObject({ epsLow: 0.2, epsHigh: 0.28, normaliser: "token-mean" });
    expect([overlongPenalty(2, 4, 2), overlongPenalty(3, 4, 2), overlongPenalty(4, 4, 2), overlongPenalty(5, 4, 2)]).toEqual([0, -0.5, -1, -1]);
    expect(overlongPenalty(100, 4, 0)).toBe(0);
  });

  it("GSPO and CISPO: GRPO advantages with their own losses", () => {
    const g = createGspo().score(fixtureSet(programs));
    expect(adv(g.samples, "p3")[0]).toBeCloseTo(0.8660239, 6);
    expect(g.loss).toMatchObject({ ratio: "sequence", epsLow: 3e-4, epsHigh: 4e-4, normaliser: "sample-mean" });
    const c = createCispo().score(fixtureSet(programs));
    expect(adv(c.samples, "p1")[0]).toBeCloseTo(-0.8660239, 6);
    expect(c.loss).toMatchObject({ objective: "cispo", epsLow: 1, epsHigh: 0.28, normaliser: "token-mean" });
  });

  it("chunked MDP: A_k = γ^(K−1−k)·R − mean_g(R), unit-mean weights over chunks", () => {
    // γ = 0.5, group g mean 0.5. p0 (K=2, R=1): G = [0.5, 1] → A = [0, 0.5]; p1 (K=1, R=0): A = −0.5;
    // group h mean 1: q0: 1 − 1 = 0. Units (sample × chunk): p0c0, p0c1, p1, p2, p3, q0, q1 = 7;
    // p0c0 has 2 tokens → weight 1/(2·7) = 1/14; p0c1 → 1/7.
    const { samples, loss } = createChunkedMdp({ gamma: 0.5 }).score(fixtureSet(programs));
    expect(adv(samples, "p0")).toEqual([0, 0, 0.5]);
    expect(adv(samples, "p1")).toEqual([-0.5, -0.5, -0.5]);
    expect(adv(samples, "q0")).toEqual([0]);
    const w = weights(samples, "p0");
    expect(w[0]).toBeCloseTo(1 / 14, 12);
    expect(w[2]).toBeCloseTo(1 / 7, 12);
    expect(loss).toMatchObject({ ratio: "chunk", normaliser: "unit-mean", mismatchThreshold: 2 });
  });

  it("reward-to-go: step rewards plus the remainder at the last chunk, discounted", () => {
    // p0: steps [0.25, 0], total 1 → r = [0.25, 0.75]; γ = 0.5: RTG = [0.25 + 0.5·0.75, 0.75] = [0.625, 0.75];
    // minus group mean 0.5 → [0.125, 0.25].
    expect(rewardsToGo({ programId: "p0", groupId: "g", reward: 1, chunkCount: 2, chunkLengths: [2, 1], stepRewards: [0.25, 0] }, 0.5)).toEqual([0.625, 0.75]);
    const { samples } = createRewardToGo({ gamma: 0.5 }).score(fixtureSet(programs));
    expect(adv(samples, "p0")).toEqual([0.125, 0.125, 0.25]);
    expect(adv(samples, "p1")).toEqual([-0.5, -0.5, -0.5]);
  });

  it("refuses bad options and samples without an outcome", () => {
    expect(() => createChunkedMdp({ gamma: 0 })).toThrow(/gamma must be in \(0, 1\]/);
    expect(() => createDapo({ maxTokens: 4, overlongCache: 5 })).toThrow(/overlongCache/);
    const set = fixtureSet(programs);
    set.programs = set.programs.filter((p) => p.programId !== "p1");
    expect(() => createGrpo().score(set)).toThrow(/sample 'p1#s0' belongs to program 'p1', which has no outcome/);
  });
});
