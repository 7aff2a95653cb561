import { test } from "node:test";
import { expect } from "mini-expect";
import { deepEqual } from "../src/index.js";

test("exports", () => {
  expect(typeof deepEqual).toBe("function");
});
