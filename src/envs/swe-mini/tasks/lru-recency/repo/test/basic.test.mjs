import { test } from "node:test";
import { expect } from "mini-expect";
import { LRUCache } from "../src/index.js";

test("exports", () => {
  expect(typeof LRUCache).toBe("function");
});
