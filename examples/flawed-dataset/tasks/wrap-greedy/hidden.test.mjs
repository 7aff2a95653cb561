import { test } from "node:test";
import assert from "node:assert/strict";
import { wrap } from "@PKG@/src/index.js";

test("wraps greedily", () => {
  assert.equal(wrap("the quick brown fox jumps", 10), "the quick\nbrown fox\njumps");
});
test("long words stay whole", () => {
  assert.equal(wrap("abcdefghij x", 4), "abcdefghij\nx");
});
