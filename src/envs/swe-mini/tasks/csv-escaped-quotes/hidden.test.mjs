import { test } from "node:test";
import assert from "node:assert/strict";
import { parseCSV } from "@PKG@/src/index.js";

test("doubled quotes inside quotes are one quote", () => {
  assert.deepEqual(parseCSV('a,"say ""hi"""\n'), [["a", 'say "hi"']]);
});
test("separators and newlines inside quotes", () => {
  assert.deepEqual(parseCSV('"x,y","1\n2"\nz,w'), [["x,y", "1\n2"], ["z", "w"]]);
});
test("crlf and custom separator", () => {
  assert.deepEqual(parseCSV("a;b\r\nc;d\r\n", ";"), [["a", "b"], ["c", "d"]]);
});
