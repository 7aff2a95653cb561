import { test } from "node:test";
import assert from "node:assert/strict";
import { parseDate, formatDate, daysBetween } from "@PKG@/src/index.js";

test("months are 1-based", () => {
  assert.equal(parseDate("2024-03-05").toISOString(), "2024-03-05T00:00:00.000Z");
});
test("round trip", () => {
  for (const s of ["2024-01-31", "2023-12-31", "2024-02-29"]) assert.equal(formatDate(parseDate(s)), s);
});
test("impossible dates are rejected", () => {
  assert.throws(() => parseDate("2023-02-29"));
  assert.throws(() => parseDate("2023-13-01"));
});
test("days between", () => {
  assert.equal(daysBetween("2024-02-28", "2024-03-01"), 2);
});
