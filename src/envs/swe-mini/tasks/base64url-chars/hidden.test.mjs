import { test } from "node:test";
import assert from "node:assert/strict";
import { encode, decode, decodeString } from "@PKG@/src/index.js";

test("url-safe alphabet without padding", () => {
  assert.equal(encode(new Uint8Array([251, 255])), "-_8");
  assert.equal(encode("hello?"), "aGVsbG8_");
});
test("round trip", () => {
  for (const s of ["", "a", "ab", "abc", "∑ unicode ✓"]) assert.equal(decodeString(encode(s)), s);
});
test("decode gives bytes", () => {
  assert.deepEqual([...decode("-_8")], [251, 255]);
});
