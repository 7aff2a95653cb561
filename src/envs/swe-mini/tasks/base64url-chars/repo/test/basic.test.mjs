import { test } from "node:test";
import { expect } from "mini-expect";
import { encode, decode, decodeString } from "../src/index.js";

test("exports", () => {
  expect(typeof encode).toBe("function");
  expect(typeof decode).toBe("function");
  expect(typeof decodeString).toBe("function");
});
