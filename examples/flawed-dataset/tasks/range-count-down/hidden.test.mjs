import { test } from "node:test";
import assert from "node:assert/strict";
import { range, rangeInclusive } from "@PKG@/src/index.js";

test("negative steps count down", () => {
  assert.deepEqual(range(5, 0, -1), [5, 4, 3, 2, 1]);
  assert.deepEqual(range(10, 1, -3), [10, 7, 4]);
});
test("positive ranges", () => {
  assert.deepEqual(range(4), [0, 1, 2, 3]);
  assert.deepEqual(range(1, 10, 4), [1, 5, 9]);
});
test("zero step is an error", () => {
  assert.throws(() => range(0, 1, 0));
  assert.deepEqual(rangeInclusive(3, 1, -1), [3, 2, 1]);
});
