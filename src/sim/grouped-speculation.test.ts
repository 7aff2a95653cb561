import { describe, expect, it } from "vitest";
import { SEER_GROUPED_SPECULATION, SiblingAcceptance } from "./grouped-speculation.js";

describe("SiblingAcceptance", () => {
  const seer = new SiblingAcceptance(SEER_GROUPED_SPECULATION);

  it("gives Seer's published lengths at its points and interpolates in log(1 + siblings) between", () => {
    expect(seer.meanLength(0)).toBe(1.7);
    expect(seer.meanLength(15)).toBe(2.85);
    // Past the last point the curve stays flat.
    expect(seer.meanLength(40)).toBe(2.85);
    // 3 siblings: log 4 / log 16 = 1/2 of the way.
    expect(seer.meanLength(3)).toBeCloseTo(1.7 + 0.5 * 1.15, 12);
    // 1 sibling: log 2 / log 16 = 1/4.
    expect(seer.meanLength(1)).toBeCloseTo(1.7 + 0.25 * 1.15, 12);
  });

  it("turns a length into the constant rate whose expected accepted run gives it", () => {
    for (const n of [0, 1, 7, 15]) {
      const [p] = seer.rates(n) as [number];
      let len = 1;
      for (let i = 1; i <= SEER_GROUPED_SPECULATION.maxSpecTokens; i++) len += p ** i;
      expect(len).toBeCloseTo(seer.meanLength(n), 9);
    }
    expect(seer.rates(5)).toBe(seer.rates(5));
  });

  it("refuses a curve it cannot use, naming the point", () => {
    expect(() => new SiblingAcceptance({ maxSpecTokens: 4, meanLengthBySiblings: [] })).toThrow("at least one point");
    expect(() => new SiblingAcceptance({ maxSpecTokens: 4, meanLengthBySiblings: [[2, 1.5], [1, 2]] })).toThrow("meanLengthBySiblings[1]: siblings must be strictly ascending");
    expect(() => new SiblingAcceptance({ maxSpecTokens: 2, meanLengthBySiblings: [[0, 3.5]] })).toThrow("in [1, 3]");
  });
});
