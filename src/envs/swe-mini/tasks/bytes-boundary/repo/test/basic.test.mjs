import { test } from "node:test";
import { expect } from "mini-expect";
import { formatBytes } from "../src/index.js";

test("exports", () => {
  expect(typeof formatBytes).toBe("function");
});
