import { describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import { Rng } from "../../core/rng.js";
import { SuffixTrie, type SuffixNode } from "./suffix-trie.js";

/** Occurrences of every substring of length 1..maxDepth, counted the slow way. */
function bruteCounts(seqs: number[][], maxDepth: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (const s of seqs) {
    for (let i = 0; i < s.length; i++) {
      for (let len = 1; len <= maxDepth && i + len <= s.length; len++) {
        const key = s.slice(i, i + len).join(",");
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
    }
  }
  return counts;
}

/** Every node's substring and count. */
function trieCounts(trie: SuffixTrie): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (node: SuffixNode, path: number[]): void => {
    for (const child of node.children()) {
      const p = [...path, child.token];
      out.set(p.join(","), child.count);
      walk(child, p);
    }
  };
  walk(trie.root, []);
  return out;
}

describe("SuffixTrie", () => {
  it("counts the occurrences of every substring up to maxDepth (worked example)", () => {
    const trie = new SuffixTrie({ maxDepth: 4 });
    trie.append("a", [1, 2, 3, 1, 2, 4, 1, 2, 3]);
    expect(trie.root.count).toBe(9);
    expect(trie.find([1])?.count).toBe(3);
    expect(trie.find([1, 2])?.count).toBe(3);
    expect(trie.find([1, 2, 3])?.count).toBe(2);
    expect(trie.find([1, 2, 4])?.count).toBe(1);
    expect(trie.find([1, 2, 3, 1])?.count).toBe(1);
    // Longer than maxDepth: not indexed.
    expect(trie.find([1, 2, 3, 1, 2])).toBeUndefined();
    expect(trie.find([4, 2])).toBeUndefined();
    // Children in first-seen order.
    expect([...(trie.find([1, 2])?.children() ?? [])].map((c) => c.token)).toEqual([3, 4]);
  });

  it("appending in pieces builds the same trie as at once, across sequences", () => {
    const rng = new Rng(7);
    for (let round = 0; round < 20; round++) {
      const depth = rng.int(1, 6);
      const seqs = Array.from({ length: rng.int(1, 4) }, () => Array.from({ length: rng.int(0, 30) }, () => rng.int(0, 3)));
      const trie = new SuffixTrie({ maxDepth: depth });
      const at = seqs.map(() => 0);
      // Interleave pieces of the sequences.
      while (at.some((p, i) => p < (seqs[i] as number[]).length)) {
        const i = rng.int(0, seqs.length - 1);
        const s = seqs[i] as number[];
        const n = rng.int(0, 5);
        trie.append(`s${i}`, s.slice(at[i], (at[i] as number) + n));
        at[i] = Math.min(s.length, (at[i] as number) + n);
      }
      expect(trieCounts(trie)).toEqual(bruteCounts(seqs, depth));
      expect(trie.root.count).toBe(seqs.reduce((a, s) => a + s.length, 0));
      expect(trie.nodeCount).toBe(1 + bruteCounts(seqs, depth).size);
    }
  });

  it("removing a sequence takes back exactly its counts and nodes", () => {
    const rng = new Rng(11);
    for (let round = 0; round < 20; round++) {
      const depth = rng.int(1, 6);
      const seqs = Array.from({ length: 4 }, () => Array.from({ length: rng.int(1, 25) }, () => rng.int(0, 2)));
      const trie = new SuffixTrie({ maxDepth: depth });
      seqs.forEach((s, i) => trie.append(`s${i}`, s));
      const gone = rng.int(0, 3);
      expect(trie.remove(`s${gone}`)).toBe(true);
      const kept = seqs.filter((_, i) => i !== gone);
      expect(trieCounts(trie)).toEqual(bruteCounts(kept, depth));
      expect(trie.nodeCount).toBe(1 + bruteCounts(kept, depth).size);
      expect(trie.tokenCount).toBe(kept.reduce((a, s) => a + s.length, 0));
      // The removed sequence can start again from nothing.
      trie.append(`s${gone}`, [9]);
      expect(trie.tokensOf(`s${gone}`)).toEqual([9]);
    }
    const trie = new SuffixTrie({ maxDepth: 3 });
    trie.append("x", [1, 2, 1, 2]);
    trie.remove("x");
    expect(trie.nodeCount).toBe(1);
    expect(trie.root.count).toBe(0);
    expect(trie.remove("x")).toBe(false);
  });

  it("keeps children in first-seen order through removals (drafts break ties by it)", () => {
    const trie = new SuffixTrie({ maxDepth: 2 });
    trie.append("a", [7, 1]);
    trie.append("b", [7, 2]);
    trie.append("c", [7, 3]);
    const order = (): number[] => [...(trie.find([7])?.children() ?? [])].map((c) => c.token);
    expect(order()).toEqual([1, 2, 3]);
    trie.remove("a");
    expect(order()).toEqual([2, 3]);
    trie.append("d", [7, 1]);
    expect(order()).toEqual([2, 3, 1]);
    trie.remove("c");
    expect(order()).toEqual([2, 1]);
    expect(trie.find([7, 3])).toBeUndefined();
  });

  it("evicts the oldest other sequences at the token budget and says which", () => {
    const trie = new SuffixTrie({ maxDepth: 3, maxTokens: 10 });
    expect(trie.append("a", [1, 2, 3, 4])).toEqual([]);
    expect(trie.append("b", [5, 6, 7, 8])).toEqual([]);
    expect(trie.append("a", [9])).toEqual([]);
    // 9 held; 4 more would be 13: a (the oldest, 5 tokens) goes, b stays.
    expect(trie.append("c", [1, 1, 1, 1])).toEqual(["a"]);
    expect(trie.sequenceIds()).toEqual(["b", "c"]);
    expect(trieCounts(trie)).toEqual(bruteCounts([[5, 6, 7, 8], [1, 1, 1, 1]], 3));
    // The sequence being appended is never evicted to make room for itself.
    expect(trie.append("c", [2, 2])).toEqual([]);
    expect(trie.append("c", [3])).toEqual(["b"]);
    expect(trie.tokenCount).toBe(7);
  });

  it("refuses a sequence longer than the whole budget without changing anything", () => {
    const trie = new SuffixTrie({ maxDepth: 3, maxTokens: 5 });
    trie.append("a", [1, 2]);
    trie.append("b", [3, 4, 5]);
    expect(() => trie.append("b", [6, 7, 8])).toThrow(/tokens: sequence 'b' would hold 6 tokens, over the suffix trie's budget of 5 \(maxTokens\)/);
    expect(trie.sequenceIds()).toEqual(["a", "b"]);
    expect(trie.tokenCount).toBe(5);
  });

  it("names a bad token and a bad bound", () => {
    const trie = new SuffixTrie();
    expect(() => trie.append("a", [1, -2])).toThrow("tokens[1]: must be a token id (an integer >= 0), got -2");
    expect(() => trie.append("a", [1.5])).toThrow(ArborError);
    expect(trie.has("a")).toBe(false);
    expect(() => new SuffixTrie({ maxDepth: 0 })).toThrow("maxDepth: must be an integer >= 1, got 0");
    expect(() => new SuffixTrie({ maxTokens: 2.5 })).toThrow("maxTokens: must be an integer >= 1, got 2.5");
  });
});
