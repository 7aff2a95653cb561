import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import { treeAttention, visibleRanges } from "./attention.js";
import { buildPackedTree, unpackSamples, type TreeSampleInput } from "./build-tree.js";
import { batchArb, sample } from "../../testing/tree-fixtures.js";
import { treeStats } from "./tree-stats.js";
import type { PackedTree } from "./packed-tree.js";

/** Each term as (context tokens, target, advantage, old logprob, weight), the way separate training sees it. */
function separateTerms(samples: readonly TreeSampleInput[]): string[] {
  const out: string[] = [];
  samples.forEach((s, si) => {
    for (let i = 1; i < s.tokenIds.length; i++) {
      if (s.lossMask[i] !== 1) continue;
      const ctx = Array.from(s.tokenIds).slice(0, i).join(",");
      out.push(`${si}|${ctx}|${s.tokenIds[i]}|${Math.fround(s.advantages[i] as number)}|${Math.fround(s.oldLogprobs[i] as number)}|${Math.fround(s.weights[i] as number)}`);
    }
  });
  return out.sort();
}

function treeTerms(tree: PackedTree): string[] {
  const t = tree.terms;
  const out: string[] = [];
  for (let j = 0; j < t.node.length; j++) {
    const ctx: number[] = [];
    for (let n = t.node[j] as number; n >= 0; n = tree.parents[n] as number) ctx.push(tree.tokens[n] as number);
    out.push(`${t.sample[j]}|${ctx.reverse().join(",")}|${t.target[j]}|${t.advantage[j]}|${t.oldLogprob[j]}|${t.weight[j]}`);
  }
  return out.sort();
}

describe("buildPackedTree", () => {
  it("packs a worked example: a fork carries one term per branch and per sample", () => {
    // [1,2,3] and [1,2,4] share 1,2 and fork after 2; [5] is a second root; [1,2,3] again duplicates sample 0.
    const samples = [sample([1, 2, 3], [0, 1, 1], 0), sample([1, 2, 4], [0, 1, 1], 1), sample([5], [0], 2), sample([1, 2, 3], [0, 0, 1], 3)];
    const { tree, termToken } = buildPackedTree(samples);
    expect(Array.from(tree.tokens)).toEqual([1, 2, 3, 4, 5]);
    expect(Array.from(tree.parents)).toEqual([-1, 0, 1, 1, -1]);
    expect(Array.from(tree.positions)).toEqual([0, 1, 2, 2, 0]);
    expect(tree.samplePaths.map((p) => Array.from(p))).toEqual([[0, 1, 2], [0, 1, 3], [4], [0, 1, 2]]);
    // Node 1 (token 2) predicts 3 for samples 0 and 3 and 4 for sample 1: three terms on one node.
    expect(Array.from(tree.terms.node)).toEqual([0, 1, 0, 1, 1]);
    expect(Array.from(tree.terms.target)).toEqual([2, 3, 2, 4, 3]);
    expect(Array.from(tree.terms.sample)).toEqual([0, 0, 1, 1, 3]);
    expect(Array.from(termToken)).toEqual([1, 2, 1, 2, 2]);
    expect(Array.from(tree.terms.advantage)).toEqual([0.5, 0.5, 1.5, 1.5, 3.5]);
    expect(treeStats(tree)).toMatchObject({ flatTokens: 10, treeTokens: 5, treeTokenRatio: 2, tokensSaved: 5, savedFraction: 0.5, terms: 5 });

    const att = treeAttention(tree);
    expect(Array.from(att.subtreeEnd)).toEqual([4, 4, 3, 4, 5]);
    expect(att.segments).toEqual([
      { start: 0, end: 2, parent: -1 },
      { start: 2, end: 3, parent: 0 },
      { start: 3, end: 4, parent: 0 },
      { start: 4, end: 5, parent: -1 },
    ]);
    expect(att.dfs).toEqual([
      { keep: 0, start: 0, end: 3 },
      { keep: 2, start: 3, end: 4 },
      { keep: 0, start: 4, end: 5 },
    ]);
    expect(att.maxPathLength).toBe(3);
    expect(visibleRanges(att, 3)).toEqual([[0, 2], [3, 4]]);
    expect(visibleRanges(att, 2)).toEqual([[0, 3]]);
    expect(att.rectangles).toContainEqual({ qStart: 3, qEnd: 4, kStart: 0, kEnd: 2, causal: false });
  });

  it("rejects malformed samples with the sample and field named", () => {
    expect(() => buildPackedTree([{ ...sample([1, 2], [0, 1]), weights: [0] }])).toThrow(/sample 0: weights has 1 entries for 2 tokens/);
    expect(() => buildPackedTree([sample([1, 2], [0, 1]), sample([3, 2], [1, 1])])).toThrow(/sample 1: lossMask\[0\] is 1/);
    expect(() => buildPackedTree([sample([1, -2], [0, 1])])).toThrow(ArborError);
    expect(() => buildPackedTree([sample([1, 2], [0, 2])])).toThrow(/lossMask\[1\] must be 0 or 1/);
  });

  it("handles the empty batch and a 20k-token chain without recursion", () => {
    expect(treeStats(buildPackedTree([]).tree)).toMatchObject({ flatTokens: 0, treeTokens: 0, treeTokenRatio: 0 });
    const long = Array.from({ length: 20_000 }, (_, i) => i % 7);
    const { tree } = buildPackedTree([sample(long, long.map((_, i) => (i > 0 ? 1 : 0)))]);
    expect(tree.tokens.length).toBe(20_000);
    expect(treeAttention(tree).segments).toHaveLength(1);
  });

  it("property: unpacking reproduces every sample and the loss terms equal the separate ones", () => {
    fc.assert(
      fc.property(batchArb, (samples) => {
        const { tree, termToken } = buildPackedTree(samples);
        expect(unpackSamples(tree)).toEqual(samples.map((s) => Array.from(s.tokenIds)));
        expect(treeTerms(tree)).toEqual(separateTerms(samples));
        const n = tree.tokens.length;
        const childTokens = new Map<number, Set<number>>();
        for (let i = 0; i < n; i++) {
          const p = tree.parents[i] as number;
          expect(p).toBeLessThan(i);
          expect(tree.positions[i]).toBe(p < 0 ? 0 : (tree.positions[p] as number) + 1);
          // A trie: siblings never repeat a token, so nothing shared is stored twice.
          const set = childTokens.get(p) ?? new Set<number>();
          expect(set.has(tree.tokens[i] as number)).toBe(false);
          childTokens.set(p, set.add(tree.tokens[i] as number));
        }
        for (let j = 0; j < termToken.length; j++) {
          const path = tree.samplePaths[tree.terms.sample[j] as number] as Int32Array;
          expect(path[(termToken[j] as number) - 1]).toBe(tree.terms.node[j]);
        }
        expect(treeStats(tree).flatTokens).toBe(samples.reduce((a, s) => a + s.tokenIds.length, 0));
      }),
      { numRuns: 300 },
    );
  });

});
