import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { referenceLoss, referenceLossGradient, validateLossSpec, type LossSpec } from "./loss-spec.js";

const LN2 = Math.log(2);

describe("referenceLoss (values worked out by hand)", () => {
  it("token ratio, PPO clip 1 ± 0.2", () => {
    const spec: LossSpec = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean" };
    // ρ = 1.5, A = +1: min(1.5, 1.2) = 1.2 (clipped)
    // ρ = 0.5, A = +1: min(0.5, 0.8) = 0.5
    // ρ = 0.5, A = −2: min(−1.0, −1.6) = −1.6 (clipped)
    // ρ = 1.1, A = −1: min(−1.1, −1.1) = −1.1
    // loss = −0.25·(1.2 + 0.5 − 1.6 − 1.1) = −0.25·(−1.0) = 0.25; 2 of 4 terms clipped.
    const old = [-1, -1, -2, -0.5];
    const rho = [1.5, 0.5, 0.5, 1.1];
    const r = referenceLoss(spec, {
      logprob: old.map((o, i) => o + Math.log(rho[i] as number)),
      oldLogprob: old,
      advantage: [1, 1, -2, -1],
      weight: [0.25, 0.25, 0.25, 0.25],
      unit: [0, 0, 0, 0],
    });
    expect(r.loss).toBeCloseTo(0.25, 12);
    expect(r.clipFraction).toBe(0.5);
    expect(r.units).toBe(4);
    // KL by k3, (ρ − 1) − ln ρ per term: 0.094535 + 0.193147 + 0.193147 + 0.004690 = 0.485519, mean 0.121380.
    expect(r.kl).toBeCloseTo(0.12138, 5);
    expect(referenceLoss(spec, { logprob: old, oldLogprob: old, advantage: [1, 1, 1, 1], weight: [1, 1, 1, 1], unit: [0, 0, 0, 0] }).kl).toBe(0);
  });

  it("dual-clip PPO (clipRatioC = 3, verl's clip_ratio_c): a negative-advantage term's loss is at most −3·A", () => {
    const spec: LossSpec = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean", clipRatioC: 3 };
    // As verl: per-token loss L = max(−A·ρ, −A·clip(ρ)), and for A < 0, min(L, −A·c).
    // ρ = e^1.5 ≈ 4.4817, A = −1: L = max(4.4817, 1.2) = 4.4817 → min(4.4817, 3) = 3 (dual-clipped)
    // ρ = 2,              A = −1: L = max(2, 1.2) = 2 → min(2, 3) = 2
    // ρ = e^1.5,          A = +1: L = max(−4.4817, −1.2) = −1.2 (ordinary clip; no dual clip for A > 0)
    // ρ = e^−0.5 ≈ 0.6065, A = −0.5: L = max(0.3033, 0.4) = 0.4 → min(0.4, 1.5) = 0.4
    // loss = 0.25·(3 + 2 − 1.2 + 0.4) = 1.05; without the dual clip 0.25·(4.4817 + 2 − 1.2 + 0.4) ≈ 1.4204.
    const input = { logprob: [-1, -1, -1, -1], oldLogprob: [-2.5, -1 - LN2, -2.5, -0.5], advantage: [-1, -1, 1, -0.5], weight: [0.25, 0.25, 0.25, 0.25], unit: [0, 1, 2, 3] };
    const r = referenceLoss(spec, input);
    expect(r.loss).toBeCloseTo(1.05, 12);
    expect(r.clipFraction).toBe(0.5); // terms 2 and 3, as before
    expect(r.dualClipFraction).toBe(0.25); // term 0
    const plain = referenceLoss({ ...spec, clipRatioC: undefined }, input);
    expect(plain.loss).toBeCloseTo(0.25 * (Math.exp(1.5) + 2 - 1.2 + 0.4), 12);
    expect(plain.dualClipFraction).toBe(0);
    // Gradients: the bounded term 0 has none; term 1 −w·A·ρ = 0.5; terms 2 and 3 are clipped.
    const g = referenceLossGradient(spec, input);
    expect(Array.from(g)).toEqual([0, expect.closeTo(0.5, 12), 0, 0]);
    expect(referenceLossGradient({ ...spec, clipRatioC: undefined }, input)[0]).toBeCloseTo(0.25 * Math.exp(1.5), 12);
  });

  it("sequence (geometric-mean) ratio as GSPO", () => {
    const spec: LossSpec = { ratio: "sequence", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "sample-mean" };
    // unit 0: d = [ln 2, 0] → log ρ = ln2/2 → ρ = √2 ≈ 1.4142, A = +1 → f = min(1.4142, 1.2) = 1.2 on both terms
    // unit 1: d = [ln 0.81, 0] → ρ = √0.81 = 0.9, A = −1 → f = min(−0.9, −0.9) = −0.9 on both terms
    // loss = −0.25·(1.2 + 1.2 − 0.9 − 0.9) = −0.15
    const r = referenceLoss(spec, {
      logprob: [LN2 - 1, -1, Math.log(0.81) - 3, -3],
      oldLogprob: [-1, -1, -3, -3],
      advantage: [1, 1, -1, -1],
      weight: [0.25, 0.25, 0.25, 0.25],
      unit: [0, 0, 1, 1],
    });
    expect(r.loss).toBeCloseTo(-0.15, 12);
    expect(r.clipFraction).toBe(0.5);
    expect(r.units).toBe(2);
  });

  it("CISPO: clipped, stop-gradient IS weight times A·log π", () => {
    const spec: LossSpec = { ratio: "token", objective: "cispo", epsLow: 1, epsHigh: 0.28, normaliser: "token-mean" };
    // term 0: old −1, ρ = 2 → lp = −1 + ln2 = −0.3068528; ρ̄ = 1.28; f = 1.28·1·(−0.3068528) = −0.3927716
    // term 1: old −2, ρ = 0.5 → lp = −2 − ln2 = −2.6931472; ρ̄ = 0.5; f = 0.5·(−1)·(−2.6931472) = 1.3465736
    // loss = −0.5·(−0.3927716 + 1.3465736) = −0.4769010
    const r = referenceLoss(spec, {
      logprob: [-1 + LN2, -2 - LN2],
      oldLogprob: [-1, -2],
      advantage: [1, -1],
      weight: [0.5, 0.5],
      unit: [0, 1],
    });
    expect(r.loss).toBeCloseTo(-0.476901, 6);
    expect(r.clipFraction).toBe(0.5);
  });

  it("chunk mismatch mask drops chunks whose trainer/engine ratio exceeds H", () => {
    const spec: LossSpec = { ratio: "chunk", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "unit-mean", mismatchThreshold: 2 };
    // chunk 0: trainerOld − engine = [ln4, 0] → geometric mean = exp(ln4/2) = 2 ≤ 2: kept
    // chunk 1: [ln9, 0] → 3 > 2: masked
    // ρ = 1 everywhere (logprob = old), A = 1, weight 0.25: loss = −(0.25 + 0.25) = −0.5
    const old = [-1, -1, -2, -2];
    const r = referenceLoss(spec, {
      logprob: old,
      oldLogprob: old,
      trainerOldLogprob: [-1 + Math.log(4), -1, -2 + Math.log(9), -2],
      advantage: [1, 1, 1, 1],
      weight: [0.25, 0.25, 0.25, 0.25],
      unit: [7, 7, 9, 9],
    });
    expect(r.loss).toBeCloseTo(-0.5, 12);
    expect(r).toMatchObject({ maskedUnits: 1, units: 2, clipFraction: 0 });
    // Without trainerOldLogprob the mask uses the current logprobs: ρ = 3 on chunk 1 masks it again.
    const r2 = referenceLoss(spec, { logprob: [-1, -1, -2 + Math.log(9), -2], oldLogprob: old, advantage: [1, 1, 1, 1], weight: [0.25, 0.25, 0.25, 0.25], unit: [7, 7, 9, 9] });
    expect(r2.maskedUnits).toBe(1);
    expect(r2.loss).toBeCloseTo(-0.5, 12);
  });

  it("rejects mismatched lengths and bad specs", () => {
    const spec: LossSpec = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean" };
    expect(() => referenceLoss(spec, { logprob: [0], oldLogprob: [], advantage: [0], weight: [0], unit: [0] })).toThrow(/oldLogprob has 0 entries for 1 terms/);
    expect(() => validateLossSpec({ ...spec, epsLow: -1 })).toThrow(/epsLow/);
    expect(() => validateLossSpec({ ...spec, normaliser: "constant" })).toThrow(/normaliserConstant/);
    expect(() => validateLossSpec({ ...spec, mismatchThreshold: 0 })).toThrow(/mismatchThreshold/);
    expect(() => validateLossSpec({ ...spec, clipRatioC: 1 })).toThrow("loss: clipRatioC must be a finite number > 1, got 1");
    expect(() => validateLossSpec({ ...spec, objective: "cispo", clipRatioC: 3 })).toThrow("loss: clipRatioC applies to objective 'clip' only, not 'cispo'");
  });
});

describe("referenceLossGradient", () => {
  it("a clipped PPO term has no gradient, an unclipped one −w·A·ρ (by hand)", () => {
    // Same four terms as the first loss test: ρ = [1.5, 0.5, 0.5, 1.1], A = [1, 1, −2, −1], w = 0.25.
    // Terms 0 and 2 are clipped → 0; term 1: −0.25·1·0.5 = −0.125; term 3: −0.25·(−1)·1.1 = 0.275.
    const old = [-1, -1, -2, -0.5];
    const rho = [1.5, 0.5, 0.5, 1.1];
    const spec: LossSpec = { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "token-mean" };
    const g = referenceLossGradient(spec, { logprob: old.map((o, i) => o + Math.log(rho[i] as number)), oldLogprob: old, advantage: [1, 1, -2, -1], weight: [0.25, 0.25, 0.25, 0.25], unit: [0, 0, 0, 0] });
    expect(g[0]).toBe(0);
    expect(g[1]).toBeCloseTo(-0.125, 12);
    expect(g[2]).toBe(0);
    expect(g[3]).toBeCloseTo(0.275, 12);
  });

  it("property: equals central finite differences of referenceLoss for every ratio and objective", () => {
    const specs: LossSpec[] = [
      { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.28, normaliser: "token-mean" },
      // c just above the clip range, so that the generated ratios cross it.
      { ratio: "token", objective: "clip", epsLow: 0.2, epsHigh: 0.28, normaliser: "token-mean", clipRatioC: 1.35 },
      { ratio: "sequence", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "sample-mean" },
      { ratio: "chunk", objective: "clip", epsLow: 0.2, epsHigh: 0.2, normaliser: "unit-mean", mismatchThreshold: 1.3 },
      { ratio: "token", objective: "cispo", epsLow: 1, epsHigh: 0.28, normaliser: "token-mean" },
    ];
    const terms = fc.array(
      fc.record({ d: fc.double({ min: -0.6, max: 0.6, noNaN: true }), old: fc.double({ min: -5, max: -0.01, noNaN: true }), a: fc.double({ min: -2, max: 2, noNaN: true }), unit: fc.integer({ min: 0, max: 3 }), w: fc.double({ min: 0.01, max: 1, noNaN: true }) }),
      { minLength: 1, maxLength: 12 },
    );
    fc.assert(
      fc.property(fc.constantFrom(...specs), terms, (spec, ts) => {
        const input = { logprob: ts.map((t) => t.old + t.d), oldLogprob: ts.map((t) => t.old), advantage: ts.map((t) => t.a), weight: ts.map((t) => t.w), unit: ts.map((t) => t.unit), trainerOldLogprob: ts.map((t, i) => t.old + (i % 3) * 0.2) };
        const g = referenceLossGradient(spec, input);
        const h = 1e-6;
        for (let t = 0; t < ts.length; t++) {
          const at = (delta: number): number => {
            const lp = input.logprob.slice();
            lp[t] = (lp[t] as number) + delta;
            // CISPO's IS weight is stop-gradient: hold the ratio fixed by moving the old logprob along.
            const old = input.oldLogprob.slice();
            if (spec.objective === "cispo") old[t] = (old[t] as number) + delta;
            return referenceLoss(spec, { ...input, logprob: lp, oldLogprob: old }).loss;
          };
          const fd = (at(h) - at(-h)) / (2 * h);
          // A clip boundary inside ±h makes the finite difference meaningless: skip those rare points.
          const kink = Math.abs((at(h) - at(0)) / h - (at(0) - at(-h)) / h) > 1e-3;
          if (!kink) expect(g[t]).toBeCloseTo(fd, 5);
        }
      }),
      { numRuns: 200 },
    );
  });
});
