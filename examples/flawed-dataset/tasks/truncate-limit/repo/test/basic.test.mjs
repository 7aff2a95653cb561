import { test } from "node:test";
import { expect } from "mini-expect";
import { truncate } from "../src/index.js";

test("exports", () => {
  expect(typeof truncate).toBe("function");
});
