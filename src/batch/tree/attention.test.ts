import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canAttend, denseMask, treeAttention, visibleRanges } from "./attention.js";
import { buildPackedTree } from "./build-tree.js";
import type { PackedTree } from "./packed-tree.js";
import { batchArb } from "../../testing/tree-fixtures.js";

function isAncestorOrSelf(tree: PackedTree, k: number, q: number): boolean {
  for (let n = q; n >= 0; n = tree.parents[n] as number) if (n === k) return true;
  return false;
}

describe("treeAttention", () => {
  it("property: mask rectangles, ancestor ranges, mask predicate and DFS schedule all equal the ancestor relation", () => {
    fc.assert(
      fc.property(batchArb, (samples) => {
        const { tree } = buildPackedTree(samples);
        const att = treeAttention(tree);
        const n = tree.tokens.length;
        const dense = denseMask(att);
        const painted = new Uint8Array(n * n);
        for (const r of att.rectangles) {
          for (let q = r.qStart; q < r.qEnd; q++) {
            for (let k = r.kStart; k < (r.causal ? Math.min(r.kEnd, q + 1) : r.kEnd); k++) painted[q * n + k] = (painted[q * n + k] as number) + 1;
          }
        }
        for (let q = 0; q < n; q++) {
          const fromRanges = new Uint8Array(n);
          for (const [a, b] of visibleRanges(att, q)) for (let k = a; k < b; k++) fromRanges[k] = 1;
          const wrong: string[] = [];
          for (let k = 0; k < n; k++) {
            const truth = isAncestorOrSelf(tree, k, q) ? 1 : 0;
            // painted: each visible key covered exactly once, never twice.
            const got = [dense[q * n + k], painted[q * n + k], fromRanges[k], canAttend(att, q, k) ? 1 : 0];
            if (got.some((g) => g !== truth)) wrong.push(`q=${q} k=${k} truth=${truth} got=${got.join(",")}`);
          }
          expect(wrong).toEqual([]);
        }
        // DFS: replaying the steps yields each leaf's root-to-leaf path; the new ranges partition the nodes.
        let path: number[] = [];
        let covered = 0;
        for (const s of att.dfs) {
          expect(s.start).toBe(covered);
          covered = s.end;
          path = path.slice(0, s.keep);
          for (let i = s.start; i < s.end; i++) path.push(i);
          const leaf = s.end - 1;
          const truth: number[] = [];
          for (let x = leaf; x >= 0; x = tree.parents[x] as number) truth.push(x);
          expect(path).toEqual(truth.reverse());
          expect(path.length).toBeLessThanOrEqual(att.maxPathLength);
        }
        expect(covered).toBe(n);
      }),
      { numRuns: 200 },
    );
  });
});
