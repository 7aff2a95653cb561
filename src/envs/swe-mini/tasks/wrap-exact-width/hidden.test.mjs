import { test } from "node:test";
import assert from "node:assert/strict";
import { wrap } from "@PKG@/src/index.js";

test("lines may be exactly the width", () => {
  assert.equal(wrap("aaa bbb ccc", 7), "aaa bbb\nccc");
});
test("wraps greedily", () => {
  assert.equal(wrap("the quick brown fox jumps", 10), "the quick\nbrown fox\njumps");
});
test("long words stay whole", () => {
  assert.equal(wrap("abcdefghij x", 4), "abcdefghij\nx");
});
