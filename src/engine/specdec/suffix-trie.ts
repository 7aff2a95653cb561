// A bounded-depth suffix trie over token sequences with occurrence counts: the structure SuffixDecoding
// (ArcticInference) and Seer's grouped drafting (DGDS) draft from.
//
// Which structure and why: a trie of every suffix cut at `maxDepth` tokens, one node per distinct
// substring of length <= maxDepth, each node counting the substring's occurrences across all sequences.
// ArcticInference keeps the same information in a path-compressed suffix tree bounded at the same depth
// (its node counts are these occurrence counts, and a compressed edge is a chain of trie nodes with equal
// counts), so drafting reads the same probabilities from either. The trie is chosen because appending
// and removing are a few lines each (walk the at most maxDepth open suffixes; decrement a suffix's path)
// and easy to check, while compression's split/merge cases (and re-pointing edge labels into the
// sequences left when one is removed) are not. The price: up to maxDepth nodes per distinct token of
// content, where the compressed tree has O(1), and as many steps per appended token. The token budget
// bounds it (nodes <= 1 + maxTokens × maxDepth); nodes hold their first child in a field (no map for the
// many that never branch). Measured for scale: 16 responses of 4,000 tokens, each a 5%-mutated copy of
// one, take ~0.77 M nodes and ~70 MB at depth 24 (~3.1 M nodes and ~225 MB at depth 64). A compressed
// tree behind the same interface is the next step should groups of long responses need it.
//
// Sequences are append-only and identified by a string id (a request); memory is bounded by `maxTokens`
// over all sequences: appending past it first removes the oldest other sequences (FIFO, as
// ArcticInference evicts cached responses); a single sequence longer than the budget is refused.
import { ArborError } from "../../core/errors.js";

/** A node of the trie: one substring, its last token, and how often it occurs. */
export interface SuffixNode {
  /** Last token of the substring (-1 at the root). */
  readonly token: number;
  /** Occurrences of the substring over all sequences (at the root: the number of tokens held). */
  readonly count: number;
  /** Substring length. */
  readonly depth: number;
  /** The continuation by `token`, if it occurs. */
  child(token: number): SuffixNode | undefined;
  /** Continuations, in the order they were first seen. */
  children(): Iterable<SuffixNode>;
}

/**
 * Most nodes have no child or one (a substring seen once continues one way), so a node holds its first
 * child in a field and only a node that branches gets a map: that keeps a node small, which matters
 * because there are up to maxDepth of them per token.
 */
class Node implements SuffixNode {
  count = 0;
  private first: Node | undefined = undefined;
  private rest: Map<number, Node> | undefined = undefined;

  constructor(
    readonly token: number,
    readonly depth: number,
  ) {}

  child(token: number): Node | undefined {
    if (this.first?.token === token) return this.first;
    return this.rest?.get(token);
  }

  *children(): Iterable<Node> {
    if (this.first) yield this.first;
    if (this.rest) yield* this.rest.values();
  }

  /** The child by `token`, created when missing (second return: whether it was). */
  childOrNew(token: number): [Node, boolean] {
    const found = this.child(token);
    if (found) return [found, false];
    const made = new Node(token, this.depth + 1);
    if (!this.first) this.first = made;
    else (this.rest ??= new Map()).set(token, made);
    return [made, true];
  }

  removeChild(token: number): void {
    if (this.first?.token === token) {
      // The next-oldest child takes the field, keeping first-seen order.
      const next = this.rest?.values().next();
      this.first = next && !next.done ? next.value : undefined;
      if (this.first) this.rest?.delete(this.first.token);
      if (this.rest?.size === 0) this.rest = undefined;
    } else {
      this.rest?.delete(token);
      if (this.rest?.size === 0) this.rest = undefined;
    }
  }
}

interface Sequence {
  tokens: number[];
  /** Nodes of the suffixes that end at the sequence's end and can still grow (depth < maxDepth). */
  open: Node[];
}

/** Bounds of a trie. */
export interface SuffixTrieOptions {
  /**
   * Longest substring indexed, which bounds match length + draft length (ArcticInference's
   * `max_tree_depth`; default 24, vLLM's `suffix_decoding_max_tree_depth`).
   */
  maxDepth?: number;
  /** Most tokens held over all sequences; older sequences are removed to stay within it. */
  maxTokens?: number;
}

export const DEFAULT_MAX_DEPTH = 24;
export const DEFAULT_MAX_TOKENS = 1 << 20;

/** Check that `tokens` are token ids (integers >= 0); `field` names them in the error. */
export function checkTokens(tokens: readonly number[], field: string): void {
  if (!Array.isArray(tokens)) throw new ArborError(`${field}: must be an array of token ids`, "invalid_request");
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (!(typeof t === "number" && Number.isInteger(t) && t >= 0)) {
      throw new ArborError(`${field}[${i}]: must be a token id (an integer >= 0), got ${String(t)}`, "invalid_request");
    }
  }
}

function positiveInt(value: number, field: string): number {
  if (!(Number.isInteger(value) && value >= 1)) throw new ArborError(`${field}: must be an integer >= 1, got ${value}`, "config");
  return value;
}

/** Suffix trie of several append-only sequences, bounded in depth and in tokens. */
export class SuffixTrie {
  readonly maxDepth: number;
  readonly maxTokens: number;
  private readonly rootNode = new Node(-1, 0);
  /** Insertion order is eviction order. */
  private readonly seqs = new Map<string, Sequence>();
  private tokens = 0;
  private nodes = 1;

  constructor(options: SuffixTrieOptions = {}) {
    this.maxDepth = positiveInt(options.maxDepth ?? DEFAULT_MAX_DEPTH, "maxDepth");
    this.maxTokens = positiveInt(options.maxTokens ?? DEFAULT_MAX_TOKENS, "maxTokens");
  }

  get root(): SuffixNode {
    return this.rootNode;
  }

  /** Tokens held over all sequences. */
  get tokenCount(): number {
    return this.tokens;
  }

  /** Nodes, the root included (at most 1 + tokenCount × maxDepth). */
  get nodeCount(): number {
    return this.nodes;
  }

  /** Sequence ids, oldest first. */
  sequenceIds(): string[] {
    return [...this.seqs.keys()];
  }

  has(seqId: string): boolean {
    return this.seqs.has(seqId);
  }

  /** Tokens of a sequence (0 for an unknown one). */
  length(seqId: string): number {
    return this.seqs.get(seqId)?.tokens.length ?? 0;
  }

  /** A sequence's tokens (empty for an unknown one); read-only view. */
  tokensOf(seqId: string): readonly number[] {
    return this.seqs.get(seqId)?.tokens ?? [];
  }

  /**
   * Append tokens to a sequence (created on first use). Removes the oldest other sequences when the
   * token budget would be exceeded and returns their ids; refuses (before changing anything) a
   * sequence that alone would exceed the budget.
   */
  append(seqId: string, tokens: readonly number[]): string[] {
    checkTokens(tokens, "tokens");
    const seq = this.seqs.get(seqId);
    const own = seq?.tokens.length ?? 0;
    if (own + tokens.length > this.maxTokens) {
      throw new ArborError(
        `tokens: sequence '${seqId}' would hold ${own + tokens.length} tokens, over the suffix trie's budget of ${this.maxTokens} (maxTokens)`,
        "capacity",
      );
    }
    const evicted: string[] = [];
    let held = this.tokens;
    for (const [id, other] of this.seqs) {
      if (held + tokens.length <= this.maxTokens) break;
      if (id === seqId) continue;
      evicted.push(id);
      held -= other.tokens.length;
    }
    for (const id of evicted) this.remove(id);
    let target = seq;
    if (!target) {
      target = { tokens: [], open: [] };
      this.seqs.set(seqId, target);
    }
    for (const t of tokens) this.push(target, t);
    return evicted;
  }

  /** Remove a sequence and every count it added; false when it is unknown. */
  remove(seqId: string): boolean {
    const seq = this.seqs.get(seqId);
    if (!seq) return false;
    const toks = seq.tokens;
    for (let start = 0; start < toks.length; start++) {
      this.rootNode.count--;
      let node = this.rootNode;
      let detached = false;
      const end = Math.min(toks.length, start + this.maxDepth);
      for (let i = start; i < end; i++) {
        const child = node.child(toks[i] as number);
        if (!child) throw new Error(`suffix trie corrupt: missing node for sequence '${seqId}' at ${i}`);
        child.count--;
        if (child.count === 0) {
          this.nodes--;
          // Its descendants on this path reach 0 on this walk too (a node counts at least its children's
          // occurrences); detaching the topmost one drops them all.
          if (!detached) node.removeChild(child.token);
          detached = true;
        }
        node = child;
      }
    }
    this.tokens -= toks.length;
    this.seqs.delete(seqId);
    return true;
  }

  /** The node of `pattern[from..]`, or undefined when that substring does not occur (or is longer than maxDepth). */
  find(pattern: readonly number[], from = 0): SuffixNode | undefined {
    let node: Node | undefined = this.rootNode;
    for (let i = from; i < pattern.length && node; i++) node = node.child(pattern[i] as number);
    return node;
  }

  private push(seq: Sequence, token: number): void {
    // Every suffix ending at the old end (shorter than maxDepth) grows by the token, and a new
    // one-token suffix starts: the root counts one more suffix start.
    this.rootNode.count++;
    const open: Node[] = [];
    for (const node of [...seq.open, this.rootNode]) {
      const [child, made] = node.childOrNew(token);
      if (made) this.nodes++;
      child.count++;
      if (child.depth < this.maxDepth) open.push(child);
    }
    seq.open = open;
    seq.tokens.push(token);
    this.tokens++;
  }
}
