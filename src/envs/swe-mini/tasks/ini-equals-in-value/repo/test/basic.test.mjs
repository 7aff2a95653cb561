import { test } from "node:test";
import { expect } from "mini-expect";
import { parseINI } from "../src/index.js";

test("exports", () => {
  expect(typeof parseINI).toBe("function");
});
