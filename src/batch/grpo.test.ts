import { describe, expect, it } from "vitest";
import { grpoAdvantages } from "./grpo.js";

describe("grpoAdvantages", () => {
  it("normalises by the unbiased (n-1) std: [1,0,0,1] -> ±sqrt(3)/2", () => {
    // mean 0.5; squared deviations sum to 1; var = 1/3; std = 0.57735; 0.5/0.57735 = 0.866025
    const a = grpoAdvantages([1, 0, 0, 1], 0);
    const h = Math.sqrt(3) / 2;
    expect(a[0]).toBeCloseTo(h, 12);
    expect(a[1]).toBeCloseTo(-h, 12);
    expect(a[2]).toBeCloseTo(-h, 12);
    expect(a[3]).toBeCloseTo(h, 12);
    // With the default eps the value moves only in the 6th digit.
    expect(grpoAdvantages([1, 0, 0, 1])[0]).toBeCloseTo(0.5 / (Math.sqrt(1 / 3) + 1e-6), 12);
    expect(grpoAdvantages([1, 0, 0, 1])[0]).toBeCloseTo(0.866024, 5);
  });

  it("matches hand-computed values for [1,2,3,4] and [3,1]", () => {
    // mean 2.5; var = (2.25+0.25+0.25+2.25)/3 = 5/3; std = 1.2909944
    const a = grpoAdvantages([1, 2, 3, 4], 0);
    [-1.161895, -0.387298, 0.387298, 1.161895].forEach((v, i) => expect(a[i]).toBeCloseTo(v, 6));
    // mean 2; std = sqrt(2)
    const b = grpoAdvantages([3, 1], 0);
    expect(b[0]).toBeCloseTo(Math.SQRT1_2, 12);
    expect(b[1]).toBeCloseTo(-Math.SQRT1_2, 12);
  });

  it("gives zeros for equal rewards, a group of one and an empty group", () => {
    expect(grpoAdvantages([0.7, 0.7, 0.7])).toEqual([0, 0, 0]);
    expect(grpoAdvantages([1])).toEqual([0]);
    expect(grpoAdvantages([])).toEqual([]);
  });

  it("sums to zero and rejects non-finite input", () => {
    const a = grpoAdvantages([0.1, 0.9, 0.4, 0.4, 1]);
    expect(a.reduce((x, y) => x + y, 0)).toBeCloseTo(0, 12);
    expect(() => grpoAdvantages([1, NaN])).toThrow("grpo: rewards[1] must be finite, got NaN");
    expect(() => grpoAdvantages([1, 0], -1)).toThrow(/eps/);
  });
});
