// A bounded-depth suffix trie over token sequences with occurrence counts: the structure SuffixDecoding
// (ArcticInference) and Seer's grouped drafting (DGDS) draft from.
//
// Which structure and why: a trie of every suffix cut at `maxDepth` tokens, one node per distinct
// substring of length <= maxDepth, each node counting the substring's occurrences across all sequences.
// ArcticInference keeps the same information in a path-compressed suffix tree bounded at the same depth
// (its node counts are these occurrence counts, and a compressed edge is a chain of trie nodes with equal
// counts), so drafting reads the same probabilities from either. The trie is chosen because appending
// and removing are a few lines each (walk the at most maxDepth open suffixes; decrement a suffix's path)
// and easy to check, while compression's split/merge cases are not; its cost is at most maxDepth nodes
// per token where the compressed tree has O(1), which the token budget bounds (nodes <= maxTokens ×
// maxDepth) and which repetitive text — the case drafting is for — stays far below.
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
  /** Continuations, in the order they were first seen. */
  readonly children: ReadonlyMap<number, SuffixNode>;
}

interface Node {
  token: number;
  count: number;
  depth: number;
  children: Map<number, Node>;
}

interface Sequence {
  tokens: number[];
  /** Nodes of the suffixes that end at the sequence's end and can still grow (depth < maxDepth). */
  open: Node[];
}

/** Bounds of a trie. */
export interface SuffixTrieOptions {
  /** Longest substring indexed (ArcticInference's `max_tree_depth`, default 64). */
  maxDepth?: number;
  /** Most tokens held over all sequences; older sequences are removed to stay within it. */
  maxTokens?: number;
}

export const DEFAULT_MAX_DEPTH = 64;
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
  private readonly rootNode: Node = { token: -1, count: 0, depth: 0, children: new Map() };
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
        const child = node.children.get(toks[i] as number);
        if (!child) throw new Error(`suffix trie corrupt: missing node for sequence '${seqId}' at ${i}`);
        child.count--;
        if (child.count === 0) {
          this.nodes--;
          // Its descendants on this path reach 0 on this walk too (a node counts at least its children's
          // occurrences); detaching the topmost one drops them all.
          if (!detached) node.children.delete(child.token);
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
    for (let i = from; i < pattern.length && node; i++) node = node.children.get(pattern[i] as number);
    return node;
  }

  private push(seq: Sequence, token: number): void {
    // Every suffix ending at the old end (shorter than maxDepth) grows by the token, and a new
    // one-token suffix starts: the root counts one more suffix start.
    this.rootNode.count++;
    const open: Node[] = [];
    for (const node of [...seq.open, this.rootNode]) {
      let child = node.children.get(token);
      if (!child) {
        child = { token, count: 0, depth: node.depth + 1, children: new Map() };
        node.children.set(token, child);
        this.nodes++;
      }
      child.count++;
      if (child.depth < this.maxDepth) open.push(child);
    }
    seq.open = open;
    seq.tokens.push(token);
    this.tokens++;
  }
}
