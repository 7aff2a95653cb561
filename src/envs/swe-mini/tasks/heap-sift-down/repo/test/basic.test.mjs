import { test } from "node:test";
import { expect } from "mini-expect";
import { MinHeap } from "../src/index.js";

test("exports", () => {
  expect(typeof MinHeap).toBe("function");
});
