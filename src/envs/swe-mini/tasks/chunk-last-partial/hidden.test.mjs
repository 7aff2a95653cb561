import { test } from "node:test";
import assert from "node:assert/strict";
import { chunk } from "@PKG@/src/index.js";

test("keeps the last partial chunk", () => {
  assert.deepEqual(chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
  assert.deepEqual(chunk([1, 2], 5), [[1, 2]]);
});
test("exact multiples and empty input", () => {
  assert.deepEqual(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]]);
  assert.deepEqual(chunk([], 3), []);
});
test("rejects bad sizes", () => {
  assert.throws(() => chunk([1], 0));
});
