import { test } from "node:test";
import { expect } from "mini-expect";
import { slugify } from "../src/index.js";

test("exports", () => {
  expect(typeof slugify).toBe("function");
});
