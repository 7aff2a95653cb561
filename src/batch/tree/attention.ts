// Attention metadata for a packed prefix tree, in the forms tree-attention kernels consume:
// - mask rectangles over maximal chains ("segments"), MagiAttention-style (q range × k range, full or causal),
// - per-token ancestor ranges and an O(1) ancestor test (FlexAttention `mask_mod`-style),
// - a DFS schedule that materialises one root-to-leaf path at a time (AReaL-DTA).
// In DFS pre-order, node k is an ancestor-or-self of q exactly when k <= q < subtreeEnd[k], which is what
// makes all three forms cheap.
import type { PackedTree } from "./packed-tree.js";

/** A maximal chain of nodes [start, end) where each node's only child is the next node. */
export interface TreeSegment {
  start: number;
  end: number;
  /** Index of the segment holding this segment's parent node, -1 for roots. */
  parent: number;
}

/** One attention rectangle: queries [qStart, qEnd) attend keys [kStart, kEnd), fully or causally (diagonal). */
export interface MaskRectangle {
  qStart: number;
  qEnd: number;
  kStart: number;
  kEnd: number;
  causal: boolean;
}

/** One step of the DFS schedule: keep the first `keep` nodes of the current path, then append [start, end). */
export interface DfsStep {
  keep: number;
  start: number;
  end: number;
}

/** Every attention form of one tree. */
export interface TreeAttention {
  /** `subtreeEnd[k]`: one past the last node of k's subtree (pre-order), so ancestor(k, q) ⇔ k <= q < subtreeEnd[k]. */
  subtreeEnd: Int32Array;
  segments: TreeSegment[];
  /** Segment index of each node. */
  segmentOf: Int32Array;
  rectangles: MaskRectangle[];
  /** One step per leaf, in pre-order; the new ranges partition all nodes. */
  dfs: DfsStep[];
  /** Longest root-to-leaf path: the most nodes the DFS schedule holds at once. */
  maxPathLength: number;
}

/** Compute the attention metadata of a tree in one pass over its nodes (plus the rectangles' output size). */
export function treeAttention(tree: PackedTree): TreeAttention {
  const n = tree.tokens.length;
  const { parents } = tree;
  const childCount = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const p = parents[i] as number;
    if (p >= 0) childCount[p] = (childCount[p] as number) + 1;
  }
  // Pre-order: a subtree is contiguous, and it ends where the next node whose parent lies outside it starts.
  const subtreeEnd = new Int32Array(n).fill(n);
  const open: number[] = [];
  for (let i = 0; i < n; i++) {
    const p = parents[i] as number;
    while (open.length > 0 && open[open.length - 1] !== p) subtreeEnd[open.pop() as number] = i;
    open.push(i);
  }

  const segments: TreeSegment[] = [];
  const segmentOf = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const p = parents[i] as number;
    const continues = p === i - 1 && p >= 0 && childCount[p] === 1;
    if (continues) {
      (segments[segments.length - 1] as TreeSegment).end = i + 1;
    } else {
      segments.push({ start: i, end: i + 1, parent: p >= 0 ? (segmentOf[p] as number) : -1 });
    }
    segmentOf[i] = segments.length - 1;
  }

  const rectangles: MaskRectangle[] = [];
  segments.forEach((s, si) => {
    rectangles.push({ qStart: s.start, qEnd: s.end, kStart: s.start, kEnd: s.end, causal: true });
    for (const [kStart, kEnd] of segmentAncestorRanges(segments, si)) {
      rectangles.push({ qStart: s.start, qEnd: s.end, kStart, kEnd, causal: false });
    }
  });

  const dfs: DfsStep[] = [];
  let start = 0;
  let maxPathLength = 0;
  for (let i = 0; i < n; i++) {
    if (childCount[i] !== 0) continue;
    dfs.push({ keep: tree.positions[start] as number, start, end: i + 1 });
    maxPathLength = Math.max(maxPathLength, (tree.positions[i] as number) + 1);
    start = i + 1;
  }
  return { subtreeEnd, segments, segmentOf, rectangles, dfs, maxPathLength };
}

/** Key ranges [start, end) covering every ancestor segment of segment `si`, merged where adjacent, ascending. */
function segmentAncestorRanges(segments: readonly TreeSegment[], si: number): [number, number][] {
  const chain: TreeSegment[] = [];
  for (let p = (segments[si] as TreeSegment).parent; p >= 0; p = (segments[p] as TreeSegment).parent) chain.push(segments[p] as TreeSegment);
  chain.reverse();
  const out: [number, number][] = [];
  for (const s of chain) {
    const last = out[out.length - 1];
    if (last && last[1] === s.start) last[1] = s.end;
    else out.push([s.start, s.end]);
  }
  return out;
}

/**
 * Key ranges [start, end) visible to query node `q` (its ancestors and itself), ascending and merged:
 * the per-token form of the tree mask.
 */
export function visibleRanges(att: TreeAttention, q: number): [number, number][] {
  const si = att.segmentOf[q] as number;
  const out = segmentAncestorRanges(att.segments, si);
  const own = att.segments[si] as TreeSegment;
  const last = out[out.length - 1];
  if (last && last[1] === own.start) last[1] = q + 1;
  else out.push([own.start, q + 1]);
  return out;
}

/** FlexAttention-style mask predicate: may query node `q` attend key node `k`? */
export function canAttend(att: TreeAttention, q: number, k: number): boolean {
  return k <= q && q < (att.subtreeEnd[k] as number);
}

/** The dense n×n 0/1 mask (row = query), for small trees and tests; row-major. */
export function denseMask(att: TreeAttention): Uint8Array {
  const n = att.subtreeEnd.length;
  const m = new Uint8Array(n * n);
  for (let k = 0; k < n; k++) for (let q = k; q < (att.subtreeEnd[k] as number); q++) m[q * n + k] = 1;
  return m;
}
