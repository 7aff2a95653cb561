import { describe, expect, it } from "vitest";
import { analyzeLanguageMix, isLanguageMixed, proseOf } from "./language-mix.js";

describe("language-mix detector", () => {
  it("accepts single-language prose, Japanese's three scripts and stray symbols", () => {
    expect(isLanguageMixed("The answer is 42, because 6 times 7 is 42.")).toBe(false);
    expect(isLanguageMixed("Ответ: сорок два, потому что шесть на семь.")).toBe(false);
    expect(isLanguageMixed("答えは四十二です。カタカナも使います。")).toBe(false);
    expect(isLanguageMixed("Let α be the angle; then the answer is 42.")).toBe(false);
    expect(analyzeLanguageMix("12 + 30 = 42")).toEqual({ letters: {}, minorityLetters: 0, minorityFraction: 0, mixedWords: [] });
  });
  it("flags prose that switches language", () => {
    const r = analyzeLanguageMix("First I add the numbers, 然后我们把结果乘以七 and get 42.");
    expect(r.dominant).toBe("latin");
    expect(r.letters.cjk).toBe(10);
    expect(isLanguageMixed("First I add the numbers, 然后我们把结果乘以七 and get 42.")).toBe(true);
    expect(isLanguageMixed("Считаем: 6*7 = 42, so the answer is forty two")).toBe(true);
  });
  it("flags a word that mixes scripts (a Cyrillic е inside a Latin word)", () => {
    const r = analyzeLanguageMix("The rеsult is 42.");
    expect(r.mixedWords).toEqual(["rеsult"]);
    expect(isLanguageMixed("The rеsult is 42.")).toBe(true);
  });
  it("ignores tool calls, code and URLs", () => {
    const text = "Я проверю это.<|tool_call|>run node --test test/<|/tool_call|> `const x = 1` see https://example.com/docs ```js\nlet y\n```";
    expect(proseOf(text)).not.toMatch(/node|const|example|let/);
    expect(isLanguageMixed(text)).toBe(false);
  });
  it("has tunable thresholds", () => {
    const text = "The answer is forty two, да";
    expect(isLanguageMixed(text)).toBe(false);
    expect(isLanguageMixed(text, { minLetters: 2, minFraction: 0.05 })).toBe(true);
  });
});
