import { test } from "node:test";
import assert from "node:assert/strict";
import { slugify } from "@PKG@/src/index.js";

test("accents are stripped", () => {
  assert.equal(slugify("Crème Brûlée"), "creme-brulee");
});
test("custom separator", () => {
  assert.equal(slugify("A B C", "_"), "a_b_c");
});
