import { test } from "node:test";
import assert from "node:assert/strict";
import { levenshtein, similarity } from "@PKG@/src/index.js";

test("empty strings", () => {
  assert.equal(levenshtein("", "abc"), 3);
  assert.equal(levenshtein("ab", ""), 2);
  assert.equal(levenshtein("", ""), 0);
});
test("classic examples", () => {
  assert.equal(levenshtein("kitten", "sitting"), 3);
  assert.equal(levenshtein("flaw", "lawn"), 2);
});
test("similarity", () => {
  assert.equal(similarity("abc", "abc"), 1);
  assert.equal(similarity("abc", "xyz"), 0);
});
