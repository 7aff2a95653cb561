import { test } from "node:test";
import { expect } from "mini-expect";
import { compare, sort } from "../src/index.js";

test("exports", () => {
  expect(typeof compare).toBe("function");
  expect(typeof sort).toBe("function");
});
