// Hand-worked drafts on one small trie. Sequence [1 2 3 1 2 4 1 2 3], maxDepth 4; the counts used:
//   "2": 3 → "2 3": 2, "2 4": 1;  "2 3" → "2 3 1": 1
//   "1 2": 3 → "1 2 3": 2, "1 2 4": 1;  "1 2 3" → "1 2 3 1": 1;  "1 2 4" → "1 2 4 1": 1
// "1 2 3 1" is at full depth, so nothing follows it in the trie.
import { describe, expect, it } from "vitest";
import { bestDraft, draftFromTrie, emptyDraft, type Draft } from "./suffix-draft.js";
import { SuffixTrie } from "./suffix-trie.js";

function example(): SuffixTrie {
  const trie = new SuffixTrie({ maxDepth: 4 });
  trie.append("a", [1, 2, 3, 1, 2, 4, 1, 2, 3]);
  return trie;
}

function rounded(d: Draft): Draft {
  const r = (x: number): number => Math.round(x * 1e6) / 1e6;
  return { ...d, probs: d.probs.map(r), score: r(d.score) };
}

describe("draftFromTrie, single path", () => {
  it("follows the most frequent child with cumulative count ratios, bounded by the match length", () => {
    // matchLen 1 ("2", budget 1): [3] at 2/3, score 2/3. matchLen 2 ("1 2", budget 2): 3 at 2/3, then
    // "1 2 3" → 1 at 2/3 × 1/2 = 1/3: score 1. matchLen 3 ("5 1 2") does not occur.
    const d = draftFromTrie(example(), [5, 1, 2]);
    expect(rounded(d)).toEqual({ tokens: [3, 1], parents: [-1, 0], probs: [0.666667, 0.333333], score: 1, matchLen: 2 });
  });

  it("stops where the cumulative probability falls below minTokenProb", () => {
    const d = draftFromTrie(example(), [5, 1, 2], { minTokenProb: 0.5 });
    // 1/3 < 0.5 ends both matches after one token; equal scores go to the longer match.
    expect(rounded(d)).toEqual({ tokens: [3], parents: [-1], probs: [0.666667], score: 0.666667, matchLen: 2 });
  });

  it("bounds the draft by maxSpecFactor × matchLen + maxSpecOffset and by maxSpecTokens", () => {
    // Factor 2: matchLen 1 may draft 2 tokens: "2" → 3 (2/3) → "2 3" → 1 (1/3), score 1; matchLen 2 reaches
    // "1 2 3 1" (full depth) after 2 tokens, score 1 too: the tie goes to the longer match.
    expect(rounded(draftFromTrie(example(), [5, 1, 2], { maxSpecFactor: 2 }))).toMatchObject({ tokens: [3, 1], matchLen: 2, score: 1 });
    // Factor 0 with offset 1: one token whatever the match.
    expect(draftFromTrie(example(), [5, 1, 2], { maxSpecFactor: 0, maxSpecOffset: 1 }).tokens).toEqual([3]);
    expect(draftFromTrie(example(), [5, 1, 2], { maxSpecTokens: 1 }).tokens).toEqual([3]);
    expect(draftFromTrie(example(), [5, 1, 2], { maxSpecTokens: 0 })).toEqual({ ...emptyDraft(), matchLen: 2 });
  });

  it("drafts nothing when no suffix of the context occurs", () => {
    expect(draftFromTrie(example(), [7, 8])).toEqual(emptyDraft());
    expect(draftFromTrie(example(), [])).toEqual(emptyDraft());
  });

  it("a count ratio below 1 comes also from occurrences that end the sequence", () => {
    // "3" occurs twice, once at the very end: "3 1" has count 1, so prob 1/2.
    const d = draftFromTrie(example(), [9, 3]);
    expect(rounded(d)).toEqual({ tokens: [1], parents: [-1], probs: [0.5], score: 0.5, matchLen: 1 });
  });
});

describe("draftFromTrie, multi-path tree (topK)", () => {
  it("takes the most probable continuations first, up to topK paths", () => {
    // matchLen 2 ("1 2", budget 4): 3 (2/3) under the context; then 4 (1/3, pushed before "1 2 3"'s child)
    // opens the second path; then 1 under 3 (1/3) and 1 under 4 (1/3). Score 2/3 + 3 × 1/3 = 5/3.
    const d = draftFromTrie(example(), [5, 1, 2], { topK: 2, maxSpecFactor: 2 });
    expect(rounded(d)).toEqual({
      tokens: [3, 4, 1, 1],
      parents: [-1, -1, 0, 1],
      probs: [0.666667, 0.333333, 0.333333, 0.333333],
      score: 1.666667,
      matchLen: 2,
    });
  });

  it("with topK 1 the tree is the single path", () => {
    const path = draftFromTrie(example(), [5, 1, 2], { maxSpecFactor: 2 });
    const tree = draftFromTrie(example(), [5, 1, 2], { maxSpecFactor: 2, topK: 1.0 });
    expect(tree).toEqual(path);
    const bigTrie = new SuffixTrie({ maxDepth: 6 });
    bigTrie.append("x", [1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 3, 7, 1, 2, 3, 4]);
    expect(draftFromTrie(bigTrie, [1, 2], { topK: 1, maxSpecFactor: 3 })).toEqual(draftFromTrie(bigTrie, [1, 2], { maxSpecFactor: 3 }));
  });

  it("prunes branches below minTokenProb and caps the paths", () => {
    // Siblings: after "7" come 1 ×4, 2 ×3, 3 ×2, 4 ×1 (counts out of 10).
    const trie = new SuffixTrie({ maxDepth: 3 });
    for (const [i, t] of [1, 1, 1, 1, 2, 2, 2, 3, 3, 4].entries()) trie.append(`s${i}`, [7, t]);
    const wide = draftFromTrie(trie, [7], { topK: 8, minTokenProb: 0.15, maxSpecFactor: 8, maxSpecTokens: 8 });
    expect(rounded(wide)).toEqual({ tokens: [1, 2, 3], parents: [-1, -1, -1], probs: [0.4, 0.3, 0.2], score: 0.9, matchLen: 1 });
    const two = draftFromTrie(trie, [7], { topK: 2, minTokenProb: 0, maxSpecFactor: 8, maxSpecTokens: 8 });
    expect(two.tokens).toEqual([1, 2]);
    // Unbounded paths with no threshold: ArcticInference's tree, every sibling.
    expect(draftFromTrie(trie, [7], { topK: Infinity, minTokenProb: 0, maxSpecFactor: 8, maxSpecTokens: 8 }).tokens).toEqual([1, 2, 3, 4]);
  });

  it("refuses bad options, naming them", () => {
    expect(() => draftFromTrie(example(), [1], { minTokenProb: 2 })).toThrow("minTokenProb: must be in [0, 1], got 2");
    expect(() => draftFromTrie(example(), [1], { topK: 0 })).toThrow("topK: must be an integer >= 1, got 0");
    expect(() => draftFromTrie(example(), [1], { maxSpecTokens: -1 })).toThrow("maxSpecTokens: must be an integer >= 0, got -1");
  });
});

describe("bestDraft", () => {
  it("keeps the highest score, the earlier source on a tie", () => {
    const a: Draft = { tokens: [1], parents: [-1], probs: [0.5], score: 0.5, matchLen: 1 };
    const b: Draft = { tokens: [2], parents: [-1], probs: [0.5], score: 0.5, matchLen: 3 };
    const c: Draft = { tokens: [3, 4], parents: [-1, 0], probs: [0.9, 0.8], score: 1.7, matchLen: 2 };
    expect(bestDraft([a, b])).toBe(a);
    expect(bestDraft([a, b, c])).toBe(c);
    expect(bestDraft([])).toEqual(emptyDraft());
  });
});
