import { test } from "node:test";
import assert from "node:assert/strict";
import { parseINI } from "@PKG@/src/index.js";

test("values may contain '='", () => {
  assert.deepEqual(parseINI("url = https://x.test/?a=1&b=2"), { "": { url: "https://x.test/?a=1&b=2" } });
});
test("sections and comments", () => {
  assert.deepEqual(parseINI("; c\n[db]\nhost = h\n# x\nport=5\n"), { "": {}, db: { host: "h", port: "5" } });
});
test("bad lines", () => {
  assert.throws(() => parseINI("nonsense"));
});
