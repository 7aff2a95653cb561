import { test } from "node:test";
import assert from "node:assert/strict";
import { truncate } from "@PKG@/src/index.js";

test("never longer than max", () => {
  assert.equal(truncate("hello world", 8), "hello…");
  assert.equal(truncate("abcdef", 5, "..."), "ab...");
});
test("fits unchanged", () => {
  assert.equal(truncate("short", 5), "short");
});
