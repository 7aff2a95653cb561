import { test } from "node:test";
import { expect } from "mini-expect";
import { render } from "../src/index.js";

test("exports", () => {
  expect(typeof render).toBe("function");
});
