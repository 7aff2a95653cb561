import { test } from "node:test";
import { expect } from "mini-expect";
import { isValid, checkDigit } from "../src/index.js";

test("exports", () => {
  expect(typeof isValid).toBe("function");
  expect(typeof checkDigit).toBe("function");
});
