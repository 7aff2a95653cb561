import { test } from "node:test";
import assert from "node:assert/strict";
import { median, mean, variance } from "@PKG@/src/index.js";

test("sorts numerically", () => {
  assert.equal(median([10, 9, 2]), 9);
  assert.equal(median([100, 25, 3, 7, 50]), 25);
});
test("even length", () => {
  assert.equal(median([4, 1, 3, 2]), 2.5);
});
test("mean and variance", () => {
  assert.equal(mean([1, 2, 3, 6]), 3);
  assert.equal(variance([2, 4, 4, 4, 5, 5, 7, 9]), 4);
});
test("does not mutate input", () => {
  const xs = [3, 1, 2];
  median(xs);
  assert.deepEqual(xs, [3, 1, 2]);
});
