// zod as Arbor's schemas use it: every module imports `z` from here, so that zod's messages are set once, before
// any schema parses. zod's defaults read "Invalid input: expected string, received undefined" for a missing field
// and never show the value given; a person fixing a config wants "required: a string" and `expected a number, got
// "abc"`. A misspelt key names the key it was likely meant to be (`unknown key "concurency" (did you mean
// "concurrency"?)`), or the keys the object takes. The messages are the same for configs, workload files and the
// servers' request bodies. A bound says it and the value given (`must be >= 1, got 0`, `must have at least 1
// entry, got 0`). A union none of whose options took the value says what they expected (`expected an integer or a
// string, got 2.5`; zod's own is "Invalid input"). Other issues (custom refinements) keep their own messages.
import { closest, distance } from "fastest-levenshtein";
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

/** Keys an object schema takes (`inst` of an unrecognized_keys issue), or none when it is not one. */
function knownKeys(inst: unknown): string[] {
  const shape = (inst as { _zod?: { def?: { shape?: unknown } } } | undefined)?._zod?.def?.shape;
  return shape !== null && typeof shape === "object" ? Object.keys(shape) : [];
}

/** Most known keys an unknown-key message lists. */
const MAX_LISTED_KEYS = 30;

/**
 * `unknown key "x" (did you mean "y"?)` when a known key is a typo away (one edit for a key of up to 3 characters,
 * else two or a third of its length: a swap of two letters is two edits), else the known keys.
 */
export function unknownKeysMessage(keys: readonly string[], known: readonly string[]): string {
  const names = keys.map((k) => JSON.stringify(k)).join(", ");
  const head = `unknown key${keys.length === 1 ? "" : "s"} ${names}`;
  if (known.length === 0) return head;
  const guesses = keys.flatMap((k) => {
    const near = closest(k, known as string[]);
    return distance(k, near) <= (k.length <= 3 ? 1 : Math.max(2, Math.floor(k.length / 3))) ? [`"${near}"`] : [];
  });
  if (guesses.length === keys.length) return `${head} (did you mean ${guesses.join(", ")}?)`;
  const listed = known.slice(0, MAX_LISTED_KEYS).join(", ");
  return `${head} (known: ${listed}${known.length > MAX_LISTED_KEYS ? ", …" : ""})`;
}

/** The `too_small` / `too_big` issue fields a bound message reads. */
interface BoundIssue {
  code: "too_small" | "too_big";
  origin: string;
  minimum?: number | bigint;
  maximum?: number | bigint;
  inclusive?: boolean;
  input?: unknown;
}

/**
 * `must be >= 1, got 0` for a number, `must be at most 64 characters, got 80` for a string, `must have at least 1
 * entry, got 0` for an array or set; undefined for other origins (dates, files), which keep zod's message.
 */
function boundMessage(iss: BoundIssue): string | undefined {
  const small = iss.code === "too_small";
  const bound = Number(small ? iss.minimum : iss.maximum);
  const inclusive = iss.inclusive !== false;
  const input = iss.input;
  if (iss.origin === "number" || iss.origin === "int" || iss.origin === "bigint") {
    return `must be ${small ? ">" : "<"}${inclusive ? "=" : ""} ${bound}, got ${given(input)}`;
  }
  // A length bound is a whole count: an exclusive one is the next count in.
  const count = inclusive ? bound : small ? bound + 1 : bound - 1;
  const side = small ? "at least" : "at most";
  if (iss.origin === "string") return `must be ${side} ${count} character${count === 1 ? "" : "s"}, got ${typeof input === "string" ? input.length : given(input)}`;
  if (iss.origin === "array" || iss.origin === "set") {
    const n = Array.isArray(input) ? input.length : input instanceof Set ? input.size : undefined;
    return `must have ${side} ${count} entr${count === 1 ? "y" : "ies"}${n === undefined ? "" : `, got ${n}`}`;
  }
  return undefined;
}

/**
 * A union none of whose options took the value: `expected an integer or a string, got 2.5` where each option
 * expected a type, else each option's first message, `; or `-joined (zod says "Invalid input" alone).
 */
function unionMessage(branches: readonly (readonly { message: string }[])[], input: unknown): string | undefined {
  const messages = [...new Set(branches.flatMap((b) => (b[0] ? [b[0].message] : [])))];
  if (messages.length === 0) return undefined;
  const got = ` got ${given(input)}`;
  const expected = messages.map((m) => /^expected (.*),( got .*)$/.exec(m));
  if (expected.every((x) => x !== null && x[2] === got)) {
    const kinds = [...new Set(expected.map((x) => (x as RegExpExecArray)[1]))];
    return `expected ${kinds.length > 1 ? `${kinds.slice(0, -1).join(", ")} or ${kinds[kinds.length - 1]}` : kinds[0]},${got}`;
  }
  return messages.join("; or ");
}

z.config({
  customError: (iss) => {
    if (iss.code === "invalid_union" && "errors" in iss && Array.isArray(iss.errors)) return unionMessage(iss.errors as { message: string }[][], iss.input);
    if (iss.code === "invalid_type") return iss.input === undefined ? `required: ${noun(iss.expected)}` : `expected ${noun(iss.expected)}, got ${given(iss.input)}`;
    if (iss.code === "too_small" || iss.code === "too_big") return boundMessage(iss as BoundIssue);
    if (iss.code === "unrecognized_keys") return unknownKeysMessage(iss.keys, knownKeys(iss.inst));
    if (iss.code === "invalid_value" && iss.values.length > 1) return `expected one of ${iss.values.map((v) => JSON.stringify(v)).join(", ")}, got ${given(iss.input)}`;
    return undefined;
  },
});

export { z };
