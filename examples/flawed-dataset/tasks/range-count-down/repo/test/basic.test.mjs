import { test } from "node:test";
import { expect } from "mini-expect";
import { range } from "../src/index.js";

test("exports", () => {
  expect(typeof range).toBe("function");
});
