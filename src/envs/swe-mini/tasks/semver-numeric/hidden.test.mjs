import { test } from "node:test";
import assert from "node:assert/strict";
import { compare, sort } from "@PKG@/src/index.js";

test("parts compare numerically", () => {
  assert.equal(compare("1.10.0", "1.9.0"), 1);
  assert.equal(compare("2.0.0", "10.0.0"), -1);
  assert.equal(compare("1.0.10", "1.0.2"), 1);
});
test("sort", () => {
  assert.deepEqual(sort(["1.10.0", "1.2.0", "1.9.3", "1.9.3-beta"]), ["1.2.0", "1.9.3-beta", "1.9.3", "1.10.0"]);
});
test("equal versions", () => {
  assert.equal(compare("v1.2.3", "1.2.3"), 0);
});
