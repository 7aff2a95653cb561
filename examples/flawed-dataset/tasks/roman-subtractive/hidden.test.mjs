import { test } from "node:test";
import assert from "node:assert/strict";
import { toRoman, fromRoman } from "@PKG@/src/index.js";

test("subtractive notation", () => {
  assert.equal(toRoman(4), "IV");
  assert.equal(toRoman(9), "IX");
  assert.equal(toRoman(1994), "MCMXCIV");
});
test("round trip", () => {
  for (let n = 1; n < 3999; n += 37) assert.equal(fromRoman(toRoman(n)), n);
});
test("range", () => {
  assert.throws(() => toRoman(0));
});
