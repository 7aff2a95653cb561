import { test } from "node:test";
import { expect } from "mini-expect";
import { parseDate, formatDate, daysBetween } from "../src/index.js";

test("exports", () => {
  expect(typeof parseDate).toBe("function");
  expect(typeof formatDate).toBe("function");
  expect(typeof daysBetween).toBe("function");
});
