import { describe, expect, it } from "vitest";
import { commonPrefix } from "./common-prefix.mjs";

describe("commonPrefix", () => {
  it("counts the leading ids two sequences share, arrays or typed arrays, at most the cap", () => {
    expect(commonPrefix([1, 2, 3], [1, 2, 4, 5])).toBe(2);
    expect(commonPrefix(new Int32Array([1, 2, 3]), new Int32Array([1, 2, 3, 4]))).toBe(3);
    expect(commonPrefix([1, 2, 3], new Uint32Array([1, 2, 3]))).toBe(3);
    expect(commonPrefix([5], [6])).toBe(0);
    expect(commonPrefix([], [1])).toBe(0);
    expect(commonPrefix([1, 2, 3], [1, 2, 3], 2)).toBe(2);
  });
});
