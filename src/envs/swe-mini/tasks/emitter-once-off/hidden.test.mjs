import { test } from "node:test";
import assert from "node:assert/strict";
import { Emitter } from "@PKG@/src/index.js";

test("off removes a once listener by its original function", () => {
  const e = new Emitter();
  let n = 0;
  const fn = () => n++;
  e.once("x", fn);
  e.off("x", fn);
  assert.equal(e.emit("x"), false);
  assert.equal(n, 0);
});
test("once fires once", () => {
  const e = new Emitter();
  const seen = [];
  e.once("x", (v) => seen.push(v));
  e.emit("x", 1);
  e.emit("x", 2);
  assert.deepEqual(seen, [1]);
  assert.equal(e.listenerCount("x"), 0);
});
test("on/off", () => {
  const e = new Emitter();
  const fn = () => {};
  e.on("y", fn).on("y", fn);
  e.off("y", fn);
  assert.equal(e.listenerCount("y"), 1);
});
