import { test } from "node:test";
import { expect } from "mini-expect";
import { deepClone } from "../src/index.js";

test("exports", () => {
  expect(typeof deepClone).toBe("function");
});
