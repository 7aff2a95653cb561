import { test } from "node:test";
import { expect } from "mini-expect";
import { toRoman, fromRoman } from "../src/index.js";

test("exports", () => {
  expect(typeof toRoman).toBe("function");
  expect(typeof fromRoman).toBe("function");
});
