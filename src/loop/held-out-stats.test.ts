import { describe, expect, it } from "vitest";
import { mean, meanSe, pairedDifference, pairedSolvedDifference, solvedRate, standardError, type HeldOutSample } from "./held-out-stats.js";

/** Samples of one task from a string of 1/0 (solved or not), sample index = position. */
const task = (taskId: string, bits: string): HeldOutSample[] => [...bits].map((b, sample) => ({ taskId, sample, solved: b === "1" }));

describe("held-out statistics (worked by hand)", () => {
  it("mean and standard error of the mean use the n − 1 deviation", () => {
    expect(mean([1, 2, 3, 4])).toBe(2.5);
    // deviations ±1.5, ±0.5: Σd² = 5, variance 5/3, SE = √(5/3 / 4) = √(5/12)
    expect(standardError([1, 2, 3, 4])).toBeCloseTo(Math.sqrt(5 / 12), 12);
    expect(standardError([7])).toBe(0);
    expect(meanSe([])).toEqual({ mean: 0, se: 0, n: 0 });
  });

  it("the solved rate is the mean of the tasks' solved fractions, its SE over tasks", () => {
    // fractions 0.5, 1, 0: mean 0.5; deviations 0, 0.5, −0.5 → variance 0.25, SE = √(0.25/3)
    const s = solvedRate([...task("a", "1100"), ...task("b", "1111"), ...task("c", "0000")]);
    expect(s.mean).toBeCloseTo(0.5, 12);
    expect(s.se).toBeCloseTo(Math.sqrt(0.25 / 3), 12);
    expect(s.n).toBe(3);
  });

  it("with one sample per task the SE is the Bernoulli SE with n − 1", () => {
    // 2 of 5 solved: p = 0.4, SE = √(p(1−p)·n/(n−1) / n) = √(0.24·5/4/5) = √0.06
    const s = solvedRate([...task("a", "1"), ...task("b", "1"), ...task("c", "0"), ...task("d", "0"), ...task("e", "0")]);
    expect(s.mean).toBeCloseTo(0.4, 12);
    expect(s.se).toBeCloseTo(Math.sqrt(0.06), 12);
  });

  it("the paired difference is the mean of per-task differences, its SE theirs", () => {
    const before = [...task("a", "1100"), ...task("b", "1111"), ...task("c", "0000")];
    const after = [...task("a", "1110"), ...task("b", "1111"), ...task("c", "0100")];
    // differences 0.25, 0, 0.25: mean 1/6; deviations 1/12, −1/6, 1/12 → Σd² = 1/24, variance 1/48, SE = √(1/144) = 1/12
    const d = pairedSolvedDifference(before, after);
    expect(d.mean).toBeCloseTo(1 / 6, 12);
    expect(d.se).toBeCloseTo(1 / 12, 12);
    // Unpaired, the same rates would have a far larger SE: pairing removes the tasks' difficulty.
    expect(d.se).toBeLessThan(solvedRate(after).se);
    expect(pairedDifference([1, 2], [2, 4])).toEqual({ mean: 1.5, se: 0.5, n: 2 });
  });

  it("refuses versions that scored different (task, sample) pairs, and a pair scored twice", () => {
    expect(() => pairedSolvedDifference(task("a", "10"), task("a", "100"))).toThrow(/different \(task, sample\) pairs/);
    expect(() => pairedSolvedDifference(task("a", "10"), task("b", "10"))).toThrow(/cannot be paired/);
    expect(() => solvedRate([...task("a", "1"), ...task("a", "0")])).toThrow(/task 'a' sample 0 scored twice/);
    expect(() => pairedDifference([1], [1, 2])).toThrow(/1 values before but 2 after/);
  });
});
