import { describe, expect, it } from "vitest";
import { quantile } from "./quantile.js";

describe("quantile", () => {
  it("interpolates between ranks", () => {
    expect(quantile([0, 10], 0.25)).toBe(2.5);
    expect(quantile([3], 0.9)).toBe(3);
    expect(quantile([], 0.5)).toBe(0);
    expect(quantile([1, 2, 3, 4, 5], 1)).toBe(5);
  });
});
