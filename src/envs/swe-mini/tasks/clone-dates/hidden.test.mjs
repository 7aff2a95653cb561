import { test } from "node:test";
import assert from "node:assert/strict";
import { deepClone } from "@PKG@/src/index.js";

test("dates are cloned as dates", () => {
  const src = { at: new Date(86400000), list: [new Date(5)] };
  const c = deepClone(src);
  assert.ok(c.at instanceof Date);
  assert.equal(c.at.getTime(), 86400000);
  assert.notEqual(c.at, src.at);
  assert.equal(c.list[0].getTime(), 5);
});
test("nested objects are independent", () => {
  const src = { a: { b: [1, 2] } };
  const c = deepClone(src);
  c.a.b.push(3);
  assert.deepEqual(src.a.b, [1, 2]);
});
test("maps and sets", () => {
  const c = deepClone(new Map([["k", new Set([1])]]));
  assert.ok(c.get("k").has(1));
});
