import { test } from "node:test";
import { expect } from "mini-expect";
import { levenshtein, similarity } from "../src/index.js";

test("exports", () => {
  expect(typeof levenshtein).toBe("function");
  expect(typeof similarity).toBe("function");
});
