import { test } from "node:test";
import assert from "node:assert/strict";
import { LRUCache } from "@PKG@/src/index.js";

test("get refreshes recency", () => {
  const c = new LRUCache(2);
  c.set("a", 1).set("b", 2);
  assert.equal(c.get("a"), 1);
  c.set("c", 3);
  assert.equal(c.has("a"), true);
  assert.equal(c.has("b"), false);
});
test("keys are in recency order", () => {
  const c = new LRUCache(3);
  c.set("x", 1).set("y", 2).set("z", 3);
  c.get("x");
  assert.deepEqual(c.keys(), ["y", "z", "x"]);
});
test("missing keys and capacity", () => {
  const c = new LRUCache(1);
  assert.equal(c.get("nope"), undefined);
  c.set("a", 1).set("b", 2);
  assert.equal(c.size, 1);
});
