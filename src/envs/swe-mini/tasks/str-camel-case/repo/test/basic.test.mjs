import { test } from "node:test";
import { expect } from "mini-expect";
import { capitalize, camelCase, kebabCase } from "../src/index.js";

test("exports", () => {
  expect(typeof capitalize).toBe("function");
  expect(typeof camelCase).toBe("function");
  expect(typeof kebabCase).toBe("function");
});
