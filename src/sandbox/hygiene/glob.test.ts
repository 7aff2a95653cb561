import { describe, expect, it } from "vitest";
import { globToRegExp, matchesAny } from "./glob.js";

describe("hygiene globs", () => {
  it("** spans directories, * and ? stay within a segment", () => {
    expect(matchesAny("a/b/c.orig", ["**/*.orig"])).toBe(true);
    expect(matchesAny("c.orig", ["**/*.orig"])).toBe(true);
    expect(matchesAny("a/b.orig/c", ["**/*.orig"])).toBe(false);
    expect(matchesAny("/workspace/.grader/x/y", ["/workspace/.grader/**"])).toBe(true);
    expect(matchesAny("/workspace/.grader", ["/workspace/.grader/**"])).toBe(false);
    expect(matchesAny("npm-debug.log.123", ["**/npm-debug.log*"])).toBe(true);
    expect(matchesAny("/workspace/.arbor-eval-ab12/t.mjs", ["/workspace/.arbor-eval-*/**"])).toBe(true);
    expect(matchesAny("ab", ["a?"])).toBe(true);
    expect(matchesAny("a/b", ["a?b"])).toBe(false);
    expect(globToRegExp("x.(y)+[z]").test("x.(y)+[z]")).toBe(true);
  });
});
