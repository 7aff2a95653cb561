import { describe, expect, it } from "vitest";
import { heldOutOfLine, numberField, parseMetricsLines } from "./metrics-lines.js";

describe("parseMetricsLines", () => {
  it("keeps the JSON object lines with their text and skips blank, cut and non-object lines", () => {
    const a = JSON.stringify({ kind: "iteration", index: 1, meanReward: 0.5 });
    const b = JSON.stringify({ kind: "held-out", index: 0, heldOut: { version: 0, solved: 0.25, solvedSe: 0.05 } });
    const text = [a, "", "  ", "[1,2]", "42", "null", b, a.slice(0, 17)].join("\n");
    const lines = parseMetricsLines(text);
    expect(lines.map((l) => l.text)).toEqual([a, b]);
    expect(lines[0]?.fields).toEqual({ kind: "iteration", index: 1, meanReward: 0.5 });
  });
});

describe("numberField and heldOutOfLine", () => {
  it("read numbers only, and a held-out score only with its version and solved rate", () => {
    expect(numberField({ a: 1, b: "1", c: null }, "a")).toBe(1);
    expect(numberField({ a: 1, b: "1", c: null }, "b")).toBeNull();
    expect(numberField({ a: 1 }, "missing")).toBeNull();
    expect(heldOutOfLine({ heldOut: { version: 2, solved: 0.4, solvedSe: 0.05, diff: 0.1 } })).toEqual({ version: 2, solved: 0.4, solvedSe: 0.05 });
    expect(heldOutOfLine({ heldOut: { version: 2, solved: 0.4 } })).toEqual({ version: 2, solved: 0.4, solvedSe: null });
    expect(heldOutOfLine({ heldOut: null })).toBeUndefined();
    expect(heldOutOfLine({ heldOut: { version: "2", solved: 0.4 } })).toBeUndefined();
    expect(heldOutOfLine({ heldOut: { version: 2 } })).toBeUndefined();
    expect(heldOutOfLine({})).toBeUndefined();
  });
});
