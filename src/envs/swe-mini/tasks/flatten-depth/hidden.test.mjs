import { test } from "node:test";
import assert from "node:assert/strict";
import { flatten } from "@PKG@/src/index.js";

test("depth limits flattening", () => {
  assert.deepEqual(flatten([1, [2, [3, [4]]]], 1), [1, 2, [3, [4]]]);
  assert.deepEqual(flatten([1, [2, [3, [4]]]], 2), [1, 2, 3, [4]]);
});
test("default flattens everything", () => {
  assert.deepEqual(flatten([[1], [[2]], [[[3]]]]), [1, 2, 3]);
});
test("depth 0 copies", () => {
  assert.deepEqual(flatten([[1]], 0), [[1]]);
});
