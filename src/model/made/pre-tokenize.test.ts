import { describe, expect, it } from "vitest";
import { preTokenizer } from "./pre-tokenize.js";
import { unicodeClass } from "./unicode-classes.js";

describe("pre-tokenizers", () => {
  it("split as llama.cpp's qwen2, llama3 and gpt-2 matchers", () => {
    const text = "Hello world's 12345  x\n\n y!? 'LL";
    expect(preTokenizer("qwen2").split(text)).toEqual(["Hello", " world", "'s", " ", "1", "2", "3", "4", "5", " ", " x", "\n\n", " y", "!?", " '", "LL"]);
    expect(preTokenizer("llama-bpe").split(text)).toEqual(["Hello", " world", "'s", " ", "123", "45", " ", " x", "\n\n", " y", "!?", " '", "LL"]);
    expect(preTokenizer("gpt-2").split(text)).toEqual(["Hello", " world", "'s", " 12345", " ", " x", "\n\n", " y", "!?", " '", "LL"]);
  });

  it("carry llama.cpp's flags and refuse unknown names", () => {
    expect(preTokenizer("qwen2")).toMatchObject({ family: "qwen2", cleanSpaces: false, ignoreMerges: false, addBosDefault: false });
    expect(preTokenizer("llama-bpe")).toMatchObject({ family: "llama3", cleanSpaces: true, ignoreMerges: true, addBosDefault: true });
    expect(preTokenizer("gpt-2")).toMatchObject({ family: "gpt2", cleanSpaces: true });
    expect(() => preTokenizer("tekken")).toThrow(/tokenizer.pre 'tekken' is not supported.*qwen2/);
  });

  it("class code points from llama.cpp's Unicode table", () => {
    expect([..."a5 日٣é_"].map((c) => unicodeClass(c.codePointAt(0) as number))).toEqual([1, 2, 0, 1, 2, 1, 0]);
    expect(unicodeClass(0x110000)).toBe(0);
  });
});
