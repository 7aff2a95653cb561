import { test } from "node:test";
import { expect } from "mini-expect";
import { median, mean, variance } from "../src/index.js";

test("exports", () => {
  expect(typeof median).toBe("function");
  expect(typeof mean).toBe("function");
  expect(typeof variance).toBe("function");
});
