import { test } from "node:test";
import assert from "node:assert/strict";
import { parse, stringify } from "@PKG@/src/index.js";

test("plus decodes to a space", () => {
  assert.deepEqual(parse("q=hello+world"), { q: "hello world" });
  assert.deepEqual(parse("?a+b=c%2Bd"), { "a b": "c+d" });
});
test("repeated keys", () => {
  assert.deepEqual(parse("a=1&a=2&b"), { a: ["1", "2"], b: "" });
});
test("round trip", () => {
  assert.deepEqual(parse(stringify({ x: "1 2", y: ["a&b", "c"] })), { x: "1 2", y: ["a&b", "c"] });
});
