// SuffixDecoding's drafting rule (ArcticInference `SuffixTree::speculate`) on a suffix trie: match the
// recent context's suffixes, longest last; from each match follow the most frequent continuation while
// the estimated probability (the product of count/parent_count along the path) stays >= minTokenProb;
// a draft's score is the sum of its tokens' probabilities, and the best-scoring match wins (a longer
// match on a tie). The draft length is bounded by the match: floor(matchLen × maxSpecFactor +
// maxSpecOffset), and by maxSpecTokens. A draft is a tree given as parent indices, the shape an engine
// verifies in one evaluation: a single path (topK 1) or up to topK paths chosen best-probability-first.
import { ArborError } from "../../core/errors.js";
import type { SuffixNode, SuffixTrie } from "./suffix-trie.js";

/** A draft: tokens in the order an engine feeds them, each with its parent's index (-1: after the context). */
export interface Draft {
  tokens: number[];
  parents: number[];
  /** Estimated probability of each token given the context (the product of count ratios on its path). */
  probs: number[];
  /** Sum of probs: the expected number of accepted tokens, as SuffixDecoding scores drafts. */
  score: number;
  /** Length of the context suffix the draft continues (0: no match). */
  matchLen: number;
}

/** Knobs of the drafting rule, ArcticInference's names and defaults. */
export interface DraftOptions {
  /** Hard cap on drafted tokens (default: the trie's maxDepth). */
  maxSpecTokens?: number;
  /** Draft at most matchLen × maxSpecFactor + maxSpecOffset tokens (default 1). */
  maxSpecFactor?: number;
  /** See maxSpecFactor (default 0). */
  maxSpecOffset?: number;
  /** Stop (prune) where the estimated probability falls below this (default 0.1). */
  minTokenProb?: number;
  /** Paths in the draft tree: 1 is a single path (default), k > 1 a tree of up to k paths. */
  topK?: number;
}

export const DEFAULT_MIN_TOKEN_PROB = 0.1;
export const DEFAULT_MAX_SPEC_FACTOR = 1;

/** A draft with nothing in it. */
export function emptyDraft(): Draft {
  return { tokens: [], parents: [], probs: [], score: 0, matchLen: 0 };
}

interface Resolved {
  maxSpecTokens: number;
  maxSpecFactor: number;
  maxSpecOffset: number;
  minTokenProb: number;
  topK: number;
}

/** Check the options and fill in the defaults (`maxDepth` is the default token cap). */
export function resolveDraftOptions(options: DraftOptions, maxDepth: number): Resolved {
  const r: Resolved = {
    maxSpecTokens: options.maxSpecTokens ?? maxDepth,
    maxSpecFactor: options.maxSpecFactor ?? DEFAULT_MAX_SPEC_FACTOR,
    maxSpecOffset: options.maxSpecOffset ?? 0,
    minTokenProb: options.minTokenProb ?? DEFAULT_MIN_TOKEN_PROB,
    topK: options.topK ?? 1,
  };
  if (!(Number.isInteger(r.maxSpecTokens) && r.maxSpecTokens >= 0)) throw new ArborError(`maxSpecTokens: must be an integer >= 0, got ${r.maxSpecTokens}`, "invalid_request");
  if (!(Number.isFinite(r.maxSpecFactor) && r.maxSpecFactor >= 0)) throw new ArborError(`maxSpecFactor: must be a number >= 0, got ${r.maxSpecFactor}`, "invalid_request");
  if (!Number.isFinite(r.maxSpecOffset)) throw new ArborError(`maxSpecOffset: must be a finite number, got ${r.maxSpecOffset}`, "invalid_request");
  if (!(r.minTokenProb >= 0 && r.minTokenProb <= 1)) throw new ArborError(`minTokenProb: must be in [0, 1], got ${r.minTokenProb}`, "invalid_request");
  if (!((Number.isInteger(r.topK) || r.topK === Infinity) && r.topK >= 1)) throw new ArborError(`topK: must be an integer >= 1, got ${r.topK}`, "invalid_request");
  return r;
}

/**
 * Draft a continuation of `context` from `trie`: the best-scoring draft over every context suffix that
 * occurs in the trie, tried from length 1 up to the trie's depth bound (maxDepth − 1: a match at full
 * depth has no continuation indexed).
 */
export function draftFromTrie(trie: SuffixTrie, context: readonly number[], options: DraftOptions = {}): Draft {
  const o = resolveDraftOptions(options, trie.maxDepth);
  let best = emptyDraft();
  const longest = Math.min(context.length, trie.maxDepth - 1);
  for (let matchLen = 1; matchLen <= longest; matchLen++) {
    const node = trie.find(context, context.length - matchLen);
    // A longer suffix occurs only if the shorter one does.
    if (!node) break;
    // The 1e-6 keeps e.g. 3 × 0.1 × 10 from flooring to 2 (ArcticInference does the same).
    const budget = Math.max(0, Math.min(o.maxSpecTokens, Math.floor(matchLen * o.maxSpecFactor + o.maxSpecOffset + 1e-6)));
    const draft = o.topK === 1 ? draftPath(node, budget, o.minTokenProb) : draftTree(node, budget, o.minTokenProb, o.topK);
    if (draft.score >= best.score) best = { ...draft, matchLen };
  }
  return best;
}

/** Follow the most frequent child (first seen on a tie) while the path's probability stays >= minProb. */
export function draftPath(from: SuffixNode, maxTokens: number, minProb: number): Draft {
  const d = emptyDraft();
  let node = from;
  let prob = 1;
  while (d.tokens.length < maxTokens) {
    let next: SuffixNode | undefined;
    for (const child of node.children()) if (!next || child.count > next.count) next = child;
    if (!next) break;
    prob *= next.count / node.count;
    if (prob < minProb) break;
    d.parents.push(d.tokens.length - 1);
    d.tokens.push(next.token);
    d.probs.push(prob);
    d.score += prob;
    node = next;
  }
  return d;
}

interface Candidate {
  prob: number;
  node: SuffixNode;
  parent: number;
  /** Push order: the tie-break among equal probabilities (first pushed first). */
  seq: number;
}

/**
 * A draft tree: repeatedly take the most probable continuation not yet drafted (children of drafted
 * tokens whose probability is >= minProb), up to maxTokens tokens and maxPaths leaves. With
 * maxPaths = Infinity this is ArcticInference's tree speculation; 1 gives draftPath's path.
 */
export function draftTree(from: SuffixNode, maxTokens: number, minProb: number, maxPaths: number): Draft {
  const d = emptyDraft();
  const queue: Candidate[] = [];
  let seq = 0;
  const expand = (node: SuffixNode, prob: number, parent: number): void => {
    for (const child of node.children()) {
      const p = (prob * child.count) / node.count;
      if (p >= minProb) queue.push({ prob: p, node: child, parent, seq: seq++ });
    }
  };
  expand(from, 1, -1);
  /** Drafted tokens (and -1, the context) with a drafted child: a token drafted under one of them opens a new path. */
  const hasChild = new Set<number>();
  let paths = 0;
  while (d.tokens.length < maxTokens && queue.length > 0) {
    let at = 0;
    for (let i = 1; i < queue.length; i++) {
      const a = queue[i] as Candidate;
      const b = queue[at] as Candidate;
      if (a.prob > b.prob || (a.prob === b.prob && a.seq < b.seq)) at = i;
    }
    const c = queue.splice(at, 1)[0] as Candidate;
    const newPaths = paths === 0 ? 1 : hasChild.has(c.parent) ? paths + 1 : paths;
    if (newPaths > maxPaths) continue;
    paths = newPaths;
    hasChild.add(c.parent);
    d.parents.push(c.parent);
    d.tokens.push(c.node.token);
    d.probs.push(c.prob);
    d.score += c.prob;
    expand(c.node, c.prob, d.tokens.length - 1);
  }
  return d;
}

/** The best-scoring of several drafts (the first on a tie, so list the preferred source first). */
export function bestDraft(drafts: readonly Draft[]): Draft {
  let best = emptyDraft();
  let seen = false;
  for (const d of drafts) {
    if (!seen || d.score > best.score) best = d;
    seen = true;
  }
  return best;
}
