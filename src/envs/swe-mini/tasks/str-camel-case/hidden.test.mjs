import { test } from "node:test";
import assert from "node:assert/strict";
import { capitalize, camelCase, kebabCase } from "@PKG@/src/index.js";

test("runs of separators count as one", () => {
  assert.equal(camelCase("foo--bar"), "fooBar");
  assert.equal(camelCase("foo__bar  baz"), "fooBarBaz");
});
test("single separators still work", () => {
  assert.equal(camelCase("foo-bar_baz qux"), "fooBarBazQux");
});
test("capitalize and kebabCase", () => {
  assert.equal(capitalize("hello world"), "Hello world");
  assert.equal(kebabCase("fooBarBaz qux"), "foo-bar-baz-qux");
});
test("trailing separators are dropped", () => {
  assert.equal(camelCase("foo-bar--"), "fooBar");
});
