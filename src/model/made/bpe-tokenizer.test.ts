// The BPE tokenizer's fragment cache changes no id: a text seen before, in any surroundings, tokenizes
// as a tokenizer that never saw it does (pre-tokenizing starts afresh after each special token).
import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { bpeChatmlSpec } from "./bpe-vocab.js";
import { BpeTokenizer } from "./bpe-tokenizer.js";

describe("BpeTokenizer fragment cache", () => {
  it("gives a fresh tokenizer's ids for repeated and re-surrounded fragments", () => {
    const spec = bpeChatmlSpec();
    const warm = new BpeTokenizer(spec);
    const rng = new Rng(7);
    const words = ["run", " the", " tests", "  ", "\n", "naïve", " café", "42", "+", "🙂", "'s", " don't", "\t", "x".repeat(70)];
    const text = (n: number): string => Array.from({ length: n }, () => words[rng.int(0, words.length - 1)]).join("");
    const system = `You are an agent. ${text(60)}`;
    for (let i = 0; i < 40; i++) {
      // A long system fragment every time, then text that differs, around ChatML's special tokens.
      const t = `<|im_start|>system\n${system}<|im_end|>\n<|im_start|>user\n${text(1 + (i % 9))}${i % 3 === 0 ? system : ""}<|im_end|>\n<|im_start|>assistant\n`;
      for (const special of [true, false]) expect(warm.encode(t, { special })).toEqual(new BpeTokenizer(spec).encode(t, { special }));
    }
    // The cached ids are not handed out to be changed: a caller's edit does not reach the next encode.
    const ids = warm.encode(system);
    ids.push(0);
    expect(warm.encode(system)).toEqual(new BpeTokenizer(spec).encode(system));
  });
});
