import { describe, expect, it } from "vitest";
import { denseMask, treeAttention } from "../batch/tree/attention.js";
import { buildPackedTree } from "../batch/tree/build-tree.js";
import { causalMask, MASKED, MAX_MASK_NODES, mergeSegments, treeMask, treeSegments, type SegmentAttention } from "./attention-mask.js";

describe("attention masks", () => {
  it("causal: row i sees 0..i", () => {
    const m = causalMask(3);
    expect(Array.from(m).map((v) => (v === 0 ? 1 : 0))).toEqual([1, 0, 0, 1, 1, 0, 1, 1, 1]);
    expect(m[1]).toBe(Math.fround(MASKED));
  });

  it("tree: built from parents alone, equals the batch module's ancestor mask", () => {
    const mk = (t: number[]) => ({ tokenIds: t, lossMask: t.map((_, i) => (i ? 1 : 0)), advantages: t.map(() => 0), oldLogprobs: t.map(() => 0), weights: t.map(() => 0) });
    const { tree } = buildPackedTree([mk([1, 2, 3, 4]), mk([1, 2, 5]), mk([1, 6, 7, 8]), mk([9, 2]), mk([1, 2, 3, 9])]);
    const ours = Array.from(treeMask(tree.parents), (v) => (v === 0 ? 1 : 0));
    expect(ours).toEqual(Array.from(denseMask(treeAttention(tree))));
  });

  it("tree segments: maximal chains in order whose keys and masks expand to exactly the dense mask", () => {
    const mk = (t: number[]) => ({ tokenIds: t, lossMask: t.map((_, i) => (i ? 1 : 0)), advantages: t.map(() => 0), oldLogprobs: t.map(() => 0), weights: t.map(() => 0) });
    const { tree } = buildPackedTree([mk([1, 2, 3, 4]), mk([1, 2, 5]), mk([1, 6, 7, 8]), mk([9, 2]), mk([1, 2, 3, 9, 9, 9])]);
    const n = tree.tokens.length;
    const segs = treeSegments(tree.parents);
    expect(segs.map((s) => [s.start, s.end])).toEqual(treeAttention(tree).segments.map((s) => [s.start, s.end]));
    const expanded = new Array<number>(n * n).fill(0);
    for (const s of segs) {
      const m = s.keys.length;
      for (let r = 0; r < s.end - s.start; r++) for (let c = 0; c < m; c++) if (s.mask[r * m + c] === 0) expanded[(s.start + r) * n + (s.keys[c] as number)] = 1;
    }
    expect(expanded).toEqual(Array.from(denseMask(treeAttention(tree))));
  });

  it("rejects parents that do not precede their child, and masks beyond the node limit", () => {
    expect(() => treeMask([-1, 2, 0])).toThrow(/node 1 has parent 2/);
    expect(() => causalMask(MAX_MASK_NODES + 1)).toThrow(/exceeds the dense-mask limit of 8192 nodes/);
  });

  it("merged blocks: every row still sees exactly its tree-mask keys; short chains merge, long chains over long contexts stay apart", () => {
    const expand = (segs: SegmentAttention[], n: number) => {
      const out = new Array<number>(n * n).fill(0);
      for (const s of segs) {
        const m = s.keys.length;
        for (let r = 0; r < s.end - s.start; r++) for (let c = 0; c < m; c++) if (s.mask[r * m + c] === 0) out[(s.start + r) * n + (s.keys[c] as number)] = 1;
      }
      return out;
    };
    // A root of 5, then 12 short branches of 4 each (many short calls): 13 chains.
    const short = [-1, 0, 1, 2, 3];
    for (let b = 0; b < 12; b++) short.push(4, short.length, short.length + 1, short.length + 2);
    const dense = Array.from(treeMask(short), (v) => (v === 0 ? 1 : 0));
    const chains = treeSegments(short);
    expect(chains).toHaveLength(13);
    for (const overhead of [0, 1_000, 80_000, Infinity]) expect(expand(mergeSegments(chains, overhead), short.length), `overhead ${overhead}`).toEqual(dense);
    expect(mergeSegments(chains)).toHaveLength(1);
    expect(mergeSegments(chains, 0)).toHaveLength(13);
    // Two branches of 400 under a root of 10: one block would score 810² entries, far more than apart.
    const long = Array.from({ length: 810 }, (_, i) => (i === 0 ? -1 : i === 410 ? 9 : i - 1));
    const apart = mergeSegments(treeSegments(long));
    // The root joins the first branch (410 × 410 ≤ 100 + 400 × 410 + overhead); the second stays apart.
    expect(apart.map((s) => [s.start, s.end])).toEqual([[0, 410], [410, 810]]);
    expect(expand(apart, long.length)).toEqual(Array.from(treeMask(long), (v) => (v === 0 ? 1 : 0)));
    expect(() => mergeSegments([chains[0]!, chains[2]!])).toThrow(/does not continue at node 5/);
  });
});
