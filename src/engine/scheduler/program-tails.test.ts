import { describe, expect, it } from "vitest";
import { ProgramTails } from "./program-tails.js";

const tokens = (n: number): Uint32Array => new Uint32Array(n).fill(7);

describe("ProgramTails", () => {
  it("drops the least recently set programs' tails once their tokens pass the bound; take and delete give tokens back", () => {
    const t = new ProgramTails(10);
    t.set("a", tokens(4));
    t.set("b", tokens(4));
    t.set("a", tokens(5)); // a is now the latest: b goes first
    expect(t.size).toEqual({ programs: 2, tokens: 9 });
    t.set("c", tokens(3));
    expect(t.take("b")).toBeUndefined();
    expect(t.size).toEqual({ programs: 2, tokens: 8 });
    expect(t.take("a")?.length).toBe(5);
    expect(t.size).toEqual({ programs: 1, tokens: 3 });
    t.delete("c");
    expect(t.size).toEqual({ programs: 0, tokens: 0 });
  });

  it("does not keep a tail longer than the bound, nor what the program had before", () => {
    const t = new ProgramTails(10);
    t.set("a", tokens(4));
    t.set("a", tokens(11));
    expect(t.take("a")).toBeUndefined();
    expect(t.size).toEqual({ programs: 0, tokens: 0 });
    expect(() => new ProgramTails(-1)).toThrow("maxTokens must be an integer >= 0");
  });
});
