// The shared CLI argument parsers: each value in range is taken as a number, each one outside it refused.
import { InvalidArgumentError } from "commander";
import { describe, expect, it } from "vitest";
import { toInt, toNonNegativeInt, toNumber, toPort, toPositiveInt, toPositiveNumber } from "./arg-parsers.js";

describe("CLI argument parsers", () => {
  it("take values in range", () => {
    expect(toInt("-3")).toBe(-3);
    expect(toPositiveInt("7")).toBe(7);
    expect(toNonNegativeInt("0")).toBe(0);
    expect(toNumber("-0.5")).toBe(-0.5);
    expect(toPositiveNumber("3e-3")).toBe(0.003);
    expect(toPort("0")).toBe(0);
    expect(toPort("65535")).toBe(65535);
  });

  it.each([
    [toInt, "1.5", "not an integer: 1.5"],
    [toInt, " ", "not an integer:  "],
    [toPositiveInt, "0", "must be an integer >= 1, got 0"],
    [toPositiveInt, "", "must be an integer >= 1, got "],
    [toNonNegativeInt, "-1", "must be an integer >= 0, got -1"],
    [toNumber, "abc", "not a number: abc"],
    [toPositiveNumber, "0", "must be a number > 0, got 0"],
    [toPositiveNumber, "-1e-3", "must be a number > 0, got -1e-3"],
    [toPort, "65536", "must be a port number 0-65535, got 65536"],
    [toPort, "", "must be a port number 0-65535, got "],
  ])("%o refuses %o", (parse, v, message) => {
    expect(() => parse(v)).toThrow(InvalidArgumentError);
    expect(() => parse(v)).toThrow(message);
  });
});
