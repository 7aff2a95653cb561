import { test } from "node:test";
import assert from "node:assert/strict";
import { deepEqual } from "@PKG@/src/index.js";

test("arrays never equal plain objects", () => {
  assert.equal(deepEqual([1, 2], { 0: 1, 1: 2 }), false);
  assert.equal(deepEqual({ 0: "a" }, ["a"]), false);
});
test("nested structures", () => {
  assert.equal(deepEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] }), true);
  assert.equal(deepEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 3 }] }), false);
});
test("NaN and dates", () => {
  assert.equal(deepEqual(NaN, NaN), true);
  assert.equal(deepEqual(new Date(5), new Date(5)), true);
});
