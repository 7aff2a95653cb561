import { test } from "node:test";
import { expect } from "mini-expect";
import { Emitter } from "../src/index.js";

test("exports", () => {
  expect(typeof Emitter).toBe("function");
});
