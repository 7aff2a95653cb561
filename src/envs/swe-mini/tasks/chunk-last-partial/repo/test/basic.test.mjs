import { test } from "node:test";
import { expect } from "mini-expect";
import { chunk } from "../src/index.js";

test("exports", () => {
  expect(typeof chunk).toBe("function");
});
