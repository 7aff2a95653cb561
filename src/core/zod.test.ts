// zod's messages as Arbor sets them (core/zod.ts): a missing field is "required", a wrong one names what was given.
import { describe, expect, it } from "vitest";
import { z } from "./zod.js";

const messages = (schema: z.ZodType, value: unknown): string[] => {
  const r = schema.safeParse(value);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
};

describe("zod messages", () => {
  const schema = z.object({ name: z.string(), seed: z.number().int(), mode: z.enum(["sync", "async"]), tags: z.array(z.string()), at: z.object({ x: z.number() }).optional() }).strict();

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

  it("leave a schema's own messages alone", () => {
    expect(messages(z.number().min(1, "must be at least 1"), 0)).toEqual([": must be at least 1"]);
    expect(messages(z.object({}).strict(), { extra: 1 })).toEqual([': Unrecognized key: "extra"']);
  });
});
