import { test } from "node:test";
import assert from "node:assert/strict";
import { render } from "@PKG@/src/index.js";

test("spaces inside braces", () => {
  assert.equal(render("Hi {{ name }}!", { name: "Ann" }), "Hi Ann!");
  assert.equal(render("{{ user.name }}/{{user.id}}", { user: { name: "b", id: 7 } }), "b/7");
});
test("missing values render empty", () => {
  assert.equal(render("[{{ nope }}]", {}), "[]");
});
