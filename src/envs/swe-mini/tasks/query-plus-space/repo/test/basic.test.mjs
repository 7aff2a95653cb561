import { test } from "node:test";
import { expect } from "mini-expect";
import { parse, stringify } from "../src/index.js";

test("exports", () => {
  expect(typeof parse).toBe("function");
  expect(typeof stringify).toBe("function");
});
