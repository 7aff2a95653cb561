import { test } from "node:test";
import { expect } from "mini-expect";
import { wrap } from "../src/index.js";

test("exports", () => {
  expect(typeof wrap).toBe("function");
});
