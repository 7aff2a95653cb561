import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ApproxRadixTree } from "./radix-tree.js";

function lcp(a: readonly number[], b: readonly number[]): number {
  let k = 0;
  while (k < a.length && k < b.length && a[k] === b[k]) k++;
  return k;
}

describe("ApproxRadixTree", () => {
  it("inserts, splits edges and finds the longest stored prefix", () => {
    const t = new ApproxRadixTree(1000);
    t.insert([1, 2, 3, 4]);
    t.insert([1, 2, 5]);
    expect(t.tokens).toBe(5); // [1,2] shared, then [3,4] and [5]
    expect(t.match([1, 2, 3, 4, 9])).toBe(4);
    expect(t.match([1, 2, 3, 9])).toBe(3);
    expect(t.match([1, 2, 5, 6])).toBe(3);
    expect(t.match([1, 9])).toBe(1);
    expect(t.match([7])).toBe(0);
    expect(t.match([])).toBe(0);
    t.insert([1, 2]); // already stored: no growth
    t.insert([]);
    expect(t.tokens).toBe(5);
    t.insert([1, 2, 3, 4, 6, 7]);
    expect(t.tokens).toBe(7);
    expect(t.match([1, 2, 3, 4, 6, 7])).toBe(6);
  });

  it("evicts least recently inserted leaves to stay within its bound", () => {
    const t = new ApproxRadixTree(10);
    t.insert([1, 1, 1, 1]); // oldest
    t.insert([2, 2, 2, 2]);
    t.insert([1, 1, 1, 1]); // refreshes branch 1, so branch 2 is now the oldest
    t.insert([3, 3, 3, 3]);
    expect(t.tokens).toBeLessThanOrEqual(10);
    expect(t.match([2, 2, 2, 2])).toBe(0);
    expect(t.match([1, 1, 1, 1])).toBe(4);
    expect(t.match([3, 3, 3, 3])).toBe(4);
  });

  it("evicts leaf by leaf: a shared stem survives while a younger branch uses it", () => {
    const t = new ApproxRadixTree(8);
    t.insert([9, 9, 9, 1, 1]);
    t.insert([9, 9, 9, 2, 2]);
    t.insert([5, 5, 5]); // 3 + 2 + 2 + 3 = 10 > 8: evicts the [1,1] leaf only
    expect(t.tokens).toBe(8);
    expect(t.match([9, 9, 9, 1, 1])).toBe(3);
    expect(t.match([9, 9, 9, 2, 2])).toBe(5);
    expect(t.match([5, 5, 5])).toBe(3);
  });

  it("keeps only the first maxTokens of an over-long sequence, and clears", () => {
    const t = new ApproxRadixTree(3);
    t.insert([1, 2, 3, 4, 5]);
    expect(t.tokens).toBe(3);
    expect(t.match([1, 2, 3, 4, 5])).toBe(3);
    t.clear();
    expect(t.tokens).toBe(0);
    expect(t.match([1, 2, 3])).toBe(0);
    expect(() => new ApproxRadixTree(0)).toThrow("maxTokens: must be an integer >= 1, got 0");
  });

  const seqs = fc.array(fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 12 }), { maxLength: 25 });
  const query = fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 14 });

  it("property: unbounded, the match is exactly the longest common prefix with an inserted sequence", () => {
    fc.assert(
      fc.property(seqs, query, (inserted, q) => {
        const t = new ApproxRadixTree(1_000_000);
        for (const s of inserted) t.insert(s);
        const truth = Math.max(0, ...inserted.map((s) => lcp(s, q)));
        expect(t.match(q)).toBe(truth);
        expect(t.tokens).toBeLessThanOrEqual(inserted.reduce((n, s) => n + s.length, 0));
      }),
      { numRuns: 300 },
    );
  });

  it("property: a sequence inserted in two parts is stored as the one sequence they make", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(query, query), { maxLength: 20 }), query, fc.integer({ min: 1, max: 30 }), (pairs, q, max) => {
        const joined = new ApproxRadixTree(max);
        const parts = new ApproxRadixTree(max);
        for (const [a, b] of pairs) {
          joined.insert(a.concat(b));
          parts.insert(a, b);
          expect(parts.tokens).toBe(joined.tokens);
          expect(parts.match(a.concat(b))).toBe(joined.match(a.concat(b)));
        }
        expect(parts.match(q)).toBe(joined.match(q));
      }),
      { numRuns: 300 },
    );
  });

  it("property: bounded, size stays within the bound and matches never exceed the true common prefix", () => {
    fc.assert(
      fc.property(seqs, query, fc.integer({ min: 1, max: 20 }), (inserted, q, max) => {
        const t = new ApproxRadixTree(max);
        for (const s of inserted) {
          t.insert(s);
          expect(t.tokens).toBeLessThanOrEqual(max);
          // The sequence just inserted is the most recent: its kept prefix is never evicted.
          expect(t.match(s)).toBe(Math.min(s.length, max));
        }
        const truth = Math.max(0, ...inserted.map((s) => lcp(s, q)));
        expect(t.match(q)).toBeLessThanOrEqual(truth);
      }),
      { numRuns: 300 },
    );
  });
});
