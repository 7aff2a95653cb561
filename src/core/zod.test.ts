// zod's messages as Arbor sets them (core/zod.ts): a missing field is "required", a wrong one or one out of
// bounds names what was given, and a union says what its options expected.
import { describe, expect, it } from "vitest";
import { unknownKeysMessage, z } from "./zod.js";

const messages = (schema: z.ZodType, value: unknown): string[] => {
  const r = schema.safeParse(value);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
};

describe("zod messages", () => {
  const schema = z.object({ name: z.string(), seed: z.number().int(), mode: z.enum(["sync", "async"]), tags: z.array(z.string()), at: z.object({ x: z.number() }).strict().optional() }).strict();

  it("say required for a missing field and name the value given otherwise", () => {
    expect(messages(schema, { seed: 1.5, mode: "sideways", tags: "a", at: [] })).toEqual([
      "name: required: a string",
      "seed: expected an integer, got 1.5",
      'mode: expected one of "sync", "async", got "sideways"',
      'tags: expected an array, got "a"',
      "at: expected an object, got an array",
    ]);
    expect(messages(schema, { name: 7, seed: "x".repeat(60), mode: "sync", tags: [null] })).toEqual([
      "name: expected a string, got 7",
      `seed: expected a number, got "${"x".repeat(36)}...`,
      "tags.0: expected a string, got null",
    ]);
  });

  it("say a bound and the value given: numbers, strings' lengths, arrays' entries", () => {
    const bounded = z.object({
      groupSize: z.number().int().min(1),
      lr: z.number().positive(),
      port: z.number().int().max(65535),
      top: z.number().lt(1),
      name: z.string().min(1).max(8),
      engines: z.array(z.string()).min(1),
      pair: z.array(z.number()).max(2),
    });
    expect(messages(bounded, { groupSize: 0, lr: -1, port: 70000, top: 1, name: "", engines: [], pair: [1, 2, 3] })).toEqual([
      "groupSize: must be >= 1, got 0",
      "lr: must be > 0, got -1",
      "port: must be <= 65535, got 70000",
      "top: must be < 1, got 1",
      "name: must be at least 1 character, got 0",
      "engines: must have at least 1 entry, got 0",
      "pair: must have at most 2 entries, got 3",
    ]);
    expect(messages(bounded.shape.name, "a-long-name")).toEqual([": must be at most 8 characters, got 11"]);
    // Dates keep zod's own message.
    expect(messages(z.date().min(new Date(1000)), new Date(0))[0]).toMatch(/Too small/);
  });

  it("say what a union's options expected (zod says 'Invalid input')", () => {
    const union = z.object({ tasks: z.union([z.number().int().min(1), z.string()]), custom: z.union([z.string(), z.object({ a: z.number() }), z.array(z.string())]) });
    expect(messages(union, { tasks: 2.5, custom: 5 })).toEqual(["tasks: expected an integer or a string, got 2.5", "custom: expected a string, an object or an array, got 5"]);
    // The option of the value's type fails otherwise: its message alone.
    expect(messages(union, { tasks: 0, custom: "x" })).toEqual(["tasks: must be >= 1, got 0"]);
    // Options that fail otherwise than by type: each one's message.
    const refined = z.object({ v: z.union([z.string().min(3), z.string().regex(/^x/, "must start with x")]) });
    expect(messages(refined, { v: "ab" })).toEqual(["v: must be at least 3 characters, got 2; or must start with x"]);
  });

  it("leave a schema's own messages alone", () => {
    expect(messages(z.number().min(1, "must be at least 1"), 0)).toEqual([": must be at least 1"]);
  });

  it("name the key a misspelt one was likely meant to be, or the keys the object takes", () => {
    expect(messages(schema, { name: "a", seed: 1, mode: "sync", tags: [], sed: 2 })).toEqual([': unknown key "sed" (did you mean "seed"?)']);
    expect(messages(schema, { name: "a", seed: 1, mode: "sync", tags: [], at: { x: 1, xx: 2 } })).toEqual(['at: unknown key "xx" (did you mean "x"?)']);
    expect(messages(schema, { name: "a", seed: 1, mode: "sync", tags: [], colour: "red", nmae: "b" })).toEqual([
      ': unknown keys "colour", "nmae" (known: name, seed, mode, tags, at)',
    ]);
    expect(messages(z.object({}).strict(), { extra: 1 })).toEqual([': unknown key "extra"']);
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`key${i}`, z.number()]));
    expect(unknownKeysMessage(["zzzzzzzz"], Object.keys(many))).toBe(`unknown key "zzzzzzzz" (known: ${Object.keys(many).slice(0, 30).join(", ")}, …)`);
  });
});
