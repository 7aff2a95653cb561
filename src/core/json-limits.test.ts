import { describe, expect, it } from "vitest";
import { jsonShapeViolation } from "./json-limits.js";

/** `[[[…]]]` nested `n` arrays deep, parsed from text (as a server receives it). */
function nested(n: number): unknown {
  return JSON.parse(`${"[".repeat(n)}${"]".repeat(n)}`);
}

describe("jsonShapeViolation", () => {
  it("accepts ordinary bodies and nesting up to the limit", () => {
    expect(jsonShapeViolation({ messages: [{ role: "user", content: "hi" }], tools: [] })).toBeUndefined();
    expect(jsonShapeViolation(nested(64))).toBeUndefined();
    expect(jsonShapeViolation("plain")).toBeUndefined();
  });

  it("names the field that nests too deep, even 50,000 levels down, without overflowing", () => {
    const body = { messages: [], tools: [{ type: "function", function: { name: "f", parameters: nested(50_000) } }] };
    expect(() => JSON.stringify(body)).toThrow(RangeError);
    const v = jsonShapeViolation(body);
    expect(v?.reason).toBe("nested more than 64 levels deep (objects and arrays)");
    expect(v?.param.startsWith("tools[0].function.parameters[0][0]")).toBe(true);
    expect(v?.param).toMatch(/… \(\d+ more levels\)$/);
  });

  it("counts depth from the body: 65 levels is one too many", () => {
    expect(jsonShapeViolation(nested(65))?.param).toMatch(/^\[0\]/);
    expect(jsonShapeViolation({ a: { b: nested(62) } })).toBeUndefined();
    expect(jsonShapeViolation({ a: { b: nested(63) } })?.param).toMatch(/^a\.b\[0\]/);
  });

  it("bounds the items of one array", () => {
    expect(jsonShapeViolation({ prompt: [1, 2, 3, 4] }, { maxDepth: 8, maxArrayItems: 3 })).toEqual({
      param: "prompt",
      reason: "has 4 items, more than the limit of 3",
    });
  });
});
