import { test } from "node:test";
import assert from "node:assert/strict";
import { isValid, checkDigit } from "@PKG@/src/index.js";

test("odd-length valid numbers", () => {
  assert.equal(isValid("79927398713"), true);
  assert.equal(isValid("79927398710"), false);
});
test("card numbers with separators", () => {
  assert.equal(isValid("4539 3195 0343 6467"), true);
  assert.equal(isValid("4539-3195-0343-6468"), false);
});
test("check digit", () => {
  assert.equal(checkDigit("7992739871"), 3);
});
