import { describe, expect, it } from "vitest";
import { RecentSet } from "./recent-set.js";

describe("RecentSet", () => {
  it("keeps the last max keys, the least recently added forgotten first", () => {
    const s = new RecentSet<string>(2);
    s.add("a");
    s.add("b");
    s.add("a"); // a is the newest now: b goes first
    s.add("c");
    expect([s.has("a"), s.has("b"), s.has("c"), s.size]).toEqual([true, false, true, 2]);
    expect(() => new RecentSet(0)).toThrow("max must be an integer >= 1");
  });
});
