import { test } from "node:test";
import { expect } from "mini-expect";
import { flatten } from "../src/index.js";

test("exports", () => {
  expect(typeof flatten).toBe("function");
});
