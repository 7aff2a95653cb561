import { test } from "node:test";
import { expect } from "mini-expect";
import { parseCSV } from "../src/index.js";

test("exports", () => {
  expect(typeof parseCSV).toBe("function");
});
