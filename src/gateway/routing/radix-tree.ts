// Approximate radix tree over token ids: what the router believes one backend has cached, built
// from the prompts (and outputs) it sent there, as sgl-router does. Bounded: past `maxTokens`
// stored tokens, least-recently-inserted leaves are evicted. "Recent" is a counter, not a clock.
import { ArborError } from "../../core/errors.js";

interface Node {
  /** Tokens on the edge from the parent (empty for the root). */
  edge: number[];
  children: Map<number, Node>;
  parent: Node | null;
  /** Tick of the last insert whose path ran through this node. */
  stamp: number;
  removed: boolean;
}

interface HeapEntry {
  stamp: number;
  node: Node;
}

/** A token-id radix tree with an LRU size bound. */
export class ApproxRadixTree {
  private readonly root: Node = { edge: [], children: new Map(), parent: null, stamp: 0, removed: false };
  private tick = 0;
  private size = 0;
  private nodeCount = 1;
  // Min-heap of leaves by stamp; entries go stale when a leaf is touched, grows or is removed,
  // and are skipped when popped (every live leaf has one entry with its current stamp).
  private heap: HeapEntry[] = [];

  constructor(readonly maxTokens: number) {
    if (!(Number.isInteger(maxTokens) && maxTokens >= 1)) {
      throw new ArborError(`radix tree maxTokens: must be an integer >= 1, got ${maxTokens}`, "config");
    }
  }

  /** Tokens stored (sum of edge lengths). */
  get tokens(): number {
    return this.size;
  }

  /**
   * Record that `seq` followed by `more` (a call's prompt and output: no copy of them joined) is (now) cached;
   * only the first `maxTokens` tokens are kept.
   */
  insert(seq: readonly number[], more: readonly number[] = NO_TOKENS): void {
    const end = Math.min(seq.length + more.length, this.maxTokens);
    if (end === 0) return;
    const tick = ++this.tick;
    let node = this.root;
    let i = 0;
    while (i < end) {
      const first = tokenAt(seq, more, i);
      let child = node.children.get(first);
      if (child === undefined) {
        const leaf: Node = { edge: tokensBetween(seq, more, i, end), children: new Map(), parent: node, stamp: tick, removed: false };
        node.children.set(first, leaf);
        this.nodeCount++;
        this.size += leaf.edge.length;
        node = leaf;
        break;
      }
      const common = commonPrefix(child.edge, seq, more, i, end);
      if (common < child.edge.length) {
        // Split the edge so the shared part becomes its own node.
        const mid: Node = { edge: child.edge.slice(0, common), children: new Map(), parent: node, stamp: tick, removed: false };
        child.edge = child.edge.slice(common);
        child.parent = mid;
        mid.children.set(child.edge[0] as number, child);
        node.children.set(first, mid);
        this.nodeCount++;
        child = mid;
      }
      child.stamp = tick;
      i += common;
      node = child;
    }
    if (node !== this.root && node.children.size === 0) this.push({ stamp: node.stamp, node });
    this.evict();
  }

  /** Length of the longest prefix of `seq` stored in the tree. Does not count as a use. */
  match(seq: readonly number[]): number {
    let node = this.root;
    let i = 0;
    while (i < seq.length) {
      const child = node.children.get(seq[i] as number);
      if (child === undefined) break;
      const common = commonPrefix(child.edge, seq, NO_TOKENS, i, seq.length);
      i += common;
      if (common < child.edge.length) break;
      node = child;
    }
    return i;
  }

  /** Forget everything (the backend restarted and lost its cache). */
  clear(): void {
    this.root.children.clear();
    this.size = 0;
    this.nodeCount = 1;
    this.heap = [];
  }

  private evict(): void {
    while (this.size > this.maxTokens) {
      const top = this.pop();
      if (top === undefined) throw new ArborError("radix tree: size above bound with no leaf to evict", "internal");
      const n = top.node;
      if (n.removed || n.children.size > 0 || n.stamp !== top.stamp || n.parent === null) continue;
      const parent = n.parent;
      parent.children.delete(n.edge[0] as number);
      n.removed = true;
      this.size -= n.edge.length;
      this.nodeCount--;
      if (parent !== this.root && parent.children.size === 0) this.push({ stamp: parent.stamp, node: parent });
    }
    // Stale entries pile up under repeated touches; rebuild from the live leaves now and then.
    if (this.heap.length > 2 * this.nodeCount + 64) this.rebuildHeap();
  }

  private rebuildHeap(): void {
    this.heap = [];
    const stack: Node[] = [this.root];
    while (stack.length > 0) {
      const n = stack.pop() as Node;
      if (n !== this.root && n.children.size === 0) this.push({ stamp: n.stamp, node: n });
      for (const c of n.children.values()) stack.push(c);
    }
  }

  private push(e: HeapEntry): void {
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if ((h[p] as HeapEntry).stamp <= e.stamp) break;
      h[i] = h[p] as HeapEntry;
      i = p;
    }
    h[i] = e;
  }

  private pop(): HeapEntry | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      let mStamp = last.stamp;
      if (l < h.length && (h[l] as HeapEntry).stamp < mStamp) {
        m = l;
        mStamp = (h[l] as HeapEntry).stamp;
      }
      if (r < h.length && (h[r] as HeapEntry).stamp < mStamp) m = r;
      if (m === i) break;
      h[i] = h[m] as HeapEntry;
      i = m;
    }
    h[i] = last;
    return top;
  }
}

/** An empty second part (insert's default, match's). */
const NO_TOKENS: readonly number[] = [];

/** Token `k` of `seq` followed by `more`. */
function tokenAt(seq: readonly number[], more: readonly number[], k: number): number {
  return (k < seq.length ? seq[k] : more[k - seq.length]) as number;
}

/** Tokens `from .. end` of `seq` followed by `more`, as a new (packed) array. */
function tokensBetween(seq: readonly number[], more: readonly number[], from: number, end: number): number[] {
  const out: number[] = [];
  for (let k = from; k < end; k++) out.push(tokenAt(seq, more, k));
  return out;
}

/** How many of `edge`'s tokens equal those of `seq` followed by `more` from `from` (up to `end`). */
function commonPrefix(edge: readonly number[], seq: readonly number[], more: readonly number[], from: number, end: number): number {
  const n = Math.min(edge.length, end - from);
  let k = 0;
  while (k < n && edge[k] === tokenAt(seq, more, from + k)) k++;
  return k;
}
