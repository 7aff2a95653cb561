import { test } from "node:test";
import assert from "node:assert/strict";
import { MinHeap } from "@PKG@/src/index.js";

test("pops in order", () => {
  const h = new MinHeap();
  for (const x of [1, 3, 2, 4]) h.push(x);
  const out = [];
  while (h.size) out.push(h.pop());
  assert.deepEqual(out, [1, 2, 3, 4]);
});
test("many values", () => {
  const h = new MinHeap();
  const xs = Array.from({ length: 200 }, (_, i) => (i * 7919) % 211);
  for (const x of xs) h.push(x);
  const out = [];
  while (h.size) out.push(h.pop());
  assert.deepEqual(out, [...xs].sort((a, b) => a - b));
});
test("custom comparator", () => {
  const h = new MinHeap((a, b) => b - a);
  h.push(1).push(3).push(2);
  assert.equal(h.pop(), 3);
});
