// zod as Arbor's schemas use it: every module imports `z` from here, so that zod's messages are set once, before
// any schema parses. zod's defaults read "Invalid input: expected string, received undefined" for a missing field
// and never show the value given; a person fixing a config wants "required: a string" and `expected a number, got
// "abc"`. The messages are the same for configs, workload files and the servers' request bodies. Other issues
// (custom refinements, bounds) keep their own messages.
import { z } from "zod";

/** `string` → `a string`, `int` → `an integer`: the name of what a schema expected. */
function noun(expected: string): string {
  const names: Record<string, string> = { int: "an integer", record: "an object", undefined: "nothing", null: "null" };
  return names[expected] ?? `${/^[aeiou]/.test(expected) ? "an" : "a"} ${expected}`;
}

/** The value given, short: strings quoted, arrays and objects by kind, at most 40 characters. */
function given(input: unknown): string {
  if (input === null) return "null";
  if (Array.isArray(input)) return "an array";
  if (typeof input === "object") return "an object";
  const text = typeof input === "string" ? JSON.stringify(input) : String(input);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

z.config({
  customError: (iss) => {
    if (iss.code === "invalid_type") return iss.input === undefined ? `required: ${noun(iss.expected)}` : `expected ${noun(iss.expected)}, got ${given(iss.input)}`;
    if (iss.code === "invalid_value" && iss.values.length > 1) return `expected one of ${iss.values.map((v) => JSON.stringify(v)).join(", ")}, got ${given(iss.input)}`;
    return undefined;
  },
});

export { z };
