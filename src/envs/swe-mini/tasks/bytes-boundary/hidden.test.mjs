import { test } from "node:test";
import assert from "node:assert/strict";
import { formatBytes } from "@PKG@/src/index.js";

test("unit switches at the boundary", () => {
  assert.equal(formatBytes(1024), "1 KB");
  assert.equal(formatBytes(1048576), "1 MB");
});
test("fractions", () => {
  assert.equal(formatBytes(1536), "1.5 KB");
  assert.equal(formatBytes(1000), "1000 B");
});
test("bad input", () => {
  assert.throws(() => formatBytes(-1));
});
