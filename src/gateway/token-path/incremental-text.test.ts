import { describe, expect, it } from "vitest";
import { IncrementalText } from "./incremental-text.js";

// A byte-level tokenizer: each id is one UTF-8 byte, decoded as engines do (U+FFFD for an incomplete sequence).
const decode = async (ids: number[]): Promise<string> => new TextDecoder().decode(Uint8Array.from(ids));
const bytes = (s: string): number[] => [...Buffer.from(s, "utf8")];

describe("IncrementalText", () => {
  it("never splits a multi-byte character and adds up to the whole decode", async () => {
    const ids = bytes("añ€😀!");
    const inc = new IncrementalText(decode);
    const deltas: string[] = [];
    for (let i = 1; i <= ids.length; i++) deltas.push(await inc.next(ids.slice(0, i)));
    expect(deltas.every((d) => !d.includes("\uFFFD"))).toBe(true);
    expect(deltas.filter((d) => d !== "")).toEqual(["a", "ñ", "€", "😀", "!"]);
    expect(await inc.finish(ids)).toEqual({ text: "añ€😀!", delta: "" });
  });

  it("flushes what was held back at the end, and fails when the end does not continue the streamed text", async () => {
    const inc = new IncrementalText(decode);
    expect(await inc.next(bytes("ab€").slice(0, 3))).toBe("ab");
    expect(await inc.finish(bytes("ab€").slice(0, 3))).toEqual({ text: "ab\uFFFD", delta: "\uFFFD" });
    const other = new IncrementalText(decode);
    await other.next(bytes("xy"));
    await expect(other.finish(bytes("zz"))).rejects.toThrow(/does not continue/);
  });
});
