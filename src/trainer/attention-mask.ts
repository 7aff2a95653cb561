// Additive attention masks (0 = visible, MASKED = hidden) for the two trainer layouts: causal over one
// flat sequence, and tree attention over a packed prefix tree, where each node sees exactly itself and
// its ancestors. The tree mask is built from the parent array alone (not from K's segment metadata), so
// the exactness test checks the tree layout against an independent derivation of visibility.
import { ArborError } from "../core/errors.js";

/**
 * Added to hidden scores before the softmax. Finite so that no `inf − inf` can appear; exp of it after
 * max-subtraction is exactly 0 in float32, so hidden keys contribute exactly nothing.
 */
export const MASKED = -1e30;

/** Largest node count a dense mask may cover (n² floats: 8192² × 4 B = 256 MiB). */
export const MAX_MASK_NODES = 8192;

function checkSize(n: number, what: string): void {
  if (n > MAX_MASK_NODES) {
    throw new ArborError(`trainer: ${what} over ${n} nodes exceeds the dense-mask limit of ${MAX_MASK_NODES} nodes; split the batch`, "capacity");
  }
}

/** Row-major n×n causal mask: query i sees keys 0..i. */
export function causalMask(n: number): Float32Array {
  checkSize(n, "causal mask");
  const m = new Float32Array(n * n).fill(MASKED);
  for (let i = 0; i < n; i++) m.fill(0, i * n, i * n + i + 1);
  return m;
}

/**
 * Row-major n×n tree mask from `parents` (pre-order: a parent precedes its children, -1 for roots):
 * row i is its parent's row plus i itself. Throws ArborError when a parent does not precede its child.
 */
export function treeMask(parents: ArrayLike<number>): Float32Array {
  const n = parents.length;
  checkSize(n, "tree mask");
  const m = new Float32Array(n * n).fill(MASKED);
  for (let i = 0; i < n; i++) {
    const p = parents[i] as number;
    if (!Number.isInteger(p) || p < -1 || p >= i) {
      throw new ArborError(`trainer: tree node ${i} has parent ${p}; parents must precede their children (pre-order)`, "trainer");
    }
    if (p >= 0) m.copyWithin(i * n, p * n, p * n + n);
    m[i * n + i] = 0;
  }
  return m;
}

/** Attention of one maximal chain of tree nodes [start, end): its keys (ancestors, then itself) and mask. */
export interface SegmentAttention {
  start: number;
  end: number;
  /** Key node indices, ascending: every ancestor of `start`, then start..end−1. */
  keys: Int32Array;
  /** Row-major (end−start)×keys.length additive mask: ancestors visible, own chain causal. */
  mask: Float32Array;
}

/**
 * Split a pre-order tree into maximal chains (a node continues its parent's chain when it is the
 * parent's only child) and give each the keys it may attend, found by walking `parents` up from the
 * chain's first node. Sparse form of {@link treeMask}: memory Σ chain × (depth) instead of n².
 */
export function treeSegments(parents: ArrayLike<number>): SegmentAttention[] {
  const n = parents.length;
  const children = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const p = parents[i] as number;
    if (!Number.isInteger(p) || p < -1 || p >= i) {
      throw new ArborError(`trainer: tree node ${i} has parent ${p}; parents must precede their children (pre-order)`, "trainer");
    }
    if (p >= 0) children[p] = (children[p] as number) + 1;
  }
  const out: SegmentAttention[] = [];
  let start = 0;
  for (let i = 1; i <= n; i++) {
    const continues = i < n && parents[i] === i - 1 && children[i - 1] === 1;
    if (continues) continue;
    const ancestors: number[] = [];
    for (let a = parents[start] as number; a >= 0; a = parents[a] as number) ancestors.push(a);
    ancestors.reverse();
    const len = i - start;
    const m = ancestors.length + len;
    checkSize(Math.max(len, m), "tree segment");
    const keys = new Int32Array(m);
    keys.set(ancestors);
    for (let k = 0; k < len; k++) keys[ancestors.length + k] = start + k;
    const mask = new Float32Array(len * m);
    for (let r = 0; r < len; r++) mask.fill(MASKED, r * m + ancestors.length + r + 1, (r + 1) * m);
    out.push({ start, end: i, keys, mask });
    start = i;
  }
  return out;
}

/**
 * Score entries one more block of attention is worth in fixed per-op overhead (forward and backward: ~90 small
 * tfjs ops per block per layer on the wasm back-end). Measured, not derived: on a quickstart run's tree (1,125
 * nodes, 32 chains; `arbor bench tree`) 20k gave the fastest step of 10k, 20k, 40k and 80k (4 blocks, 650k
 * entries, against 32 chains and 487k entries unmerged, or 2 blocks and 958k at 80k).
 */
export const BLOCK_OVERHEAD_ENTRIES = 20_000;

/** Sorted union of two ascending key lists. */
function unionKeys(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length || j < b.length) {
    const x = i < a.length ? (a[i] as number) : Infinity;
    const y = j < b.length ? (b[j] as number) : Infinity;
    const v = Math.min(x, y);
    if (x === v) i++;
    if (y === v) j++;
    out[k++] = v;
  }
  return out.slice(0, k);
}

/**
 * Merge consecutive chains into blocks that attend the union of their keys (each row still sees exactly its own
 * chain's keys, through the block's mask) wherever the extra score entries cost less than another block's fixed
 * overhead (`overheadEntries`): a tree of many short chains (many short calls) then runs a few blocks instead of
 * paying per-op overhead per chain, while long chains over long contexts stay separate (sparse). Greedy, left to
 * right. Throws ArborError when segments do not continue one another.
 */
export function mergeSegments(segments: readonly SegmentAttention[], overheadEntries = BLOCK_OVERHEAD_ENTRIES): SegmentAttention[] {
  const groups: { start: number; end: number; keys: Int32Array; parts: SegmentAttention[]; cost: number }[] = [];
  for (const s of segments) {
    const last = groups[groups.length - 1];
    if (last && last.end !== s.start) throw new ArborError(`trainer: segment [${s.start}, ${s.end}) does not continue at node ${last.end}`, "trainer");
    const own = (s.end - s.start) * s.keys.length;
    if (last) {
      const keys = unionKeys(last.keys, s.keys);
      const merged = (s.end - last.start) * keys.length;
      if (merged <= last.cost + own + overheadEntries) {
        Object.assign(last, { end: s.end, keys, cost: merged });
        last.parts.push(s);
        continue;
      }
    }
    groups.push({ start: s.start, end: s.end, keys: s.keys, parts: [s], cost: own });
  }
  return groups.map((g) => {
    if (g.parts.length === 1) return g.parts[0] as SegmentAttention;
    const m = g.keys.length;
    checkSize(Math.max(g.end - g.start, m), "merged tree block");
    const column = new Map<number, number>();
    g.keys.forEach((key, c) => column.set(key, c));
    const mask = new Float32Array((g.end - g.start) * m).fill(MASKED);
    for (const s of g.parts) {
      const sm = s.keys.length;
      const cols = Array.from(s.keys, (key) => column.get(key) as number);
      for (let r = 0; r < s.end - s.start; r++) {
        const row = (s.start - g.start + r) * m;
        for (let c = 0; c < sm; c++) mask[row + (cols[c] as number)] = s.mask[r * sm + c] as number;
      }
    }
    return { start: g.start, end: g.end, keys: g.keys, mask };
  });
}
