// Prefix-tree merging (docs/references.md §C1): every sample of a batch goes into one token trie, packed in DFS
// pre-order, so a prefix shared by k samples is computed once instead of k times. Loss terms stay per sample
// (see packed-tree.ts for the convention), so training on the tree is exactly training on the samples.
import { ArborError } from "../../core/errors.js";
import type { PackedTree } from "./packed-tree.js";

/** What the tree needs of one sample: its tokens and, per token, loss mask, advantage, old logprob, weight. */
export interface TreeSampleInput {
  tokenIds: ArrayLike<number>;
  lossMask: ArrayLike<number>;
  advantages: ArrayLike<number>;
  oldLogprobs: ArrayLike<number>;
  /** Per-token loss weight (the normaliser, see estimators/loss-spec.ts). */
  weights: ArrayLike<number>;
}

/** A packed tree plus, for each term, the index of its target token within its sample. */
export interface BuiltTree {
  tree: PackedTree;
  /** `termToken[j]`: position in `samples[tree.terms.sample[j]]` of the token term j predicts. */
  termToken: Int32Array;
}

function fail(message: string): never {
  throw new ArborError(`tree: ${message}`, "batch");
}

interface TrieNode {
  token: number;
  children: Map<number, TrieNode>;
  /** Children in first-insertion order: a stable, reproducible DFS order. */
  order: TrieNode[];
  index: number;
}

/**
 * Merge samples into a token trie and pack it in DFS pre-order. Children are visited in the order in which
 * they were first inserted, so the layout is a pure function of the sample order. Terms come out ordered
 * by sample, then by token position. Throws an {@link ArborError} naming the sample and field when arrays
 * disagree in length, a token id is not an integer >= 0, or a sample's first token has loss mask 1 (no
 * position predicts it).
 */
export function buildPackedTree(samples: readonly TreeSampleInput[]): BuiltTree {
  const roots: TrieNode[] = [];
  const rootByToken = new Map<number, TrieNode>();
  const leafPaths: TrieNode[][] = [];
  let nTerms = 0;
  samples.forEach((s, si) => {
    const n = s.tokenIds.length;
    for (const f of ["lossMask", "advantages", "oldLogprobs", "weights"] as const) {
      if (s[f].length !== n) fail(`sample ${si}: ${f} has ${s[f].length} entries for ${n} tokens`);
    }
    const path: TrieNode[] = [];
    let siblings = rootByToken;
    let order = roots;
    for (let i = 0; i < n; i++) {
      const tok = s.tokenIds[i] as number;
      if (!Number.isInteger(tok) || tok < 0) fail(`sample ${si}: tokenIds[${i}] must be an integer >= 0, got ${tok}`);
      const m = s.lossMask[i];
      if (m !== 0 && m !== 1) fail(`sample ${si}: lossMask[${i}] must be 0 or 1, got ${m}`);
      if (m === 1) {
        if (i === 0) fail(`sample ${si}: lossMask[0] is 1 but the first token has no position that predicts it`);
        nTerms++;
      }
      let node = siblings.get(tok);
      if (!node) {
        node = { token: tok, children: new Map(), order: [], index: -1 };
        siblings.set(tok, node);
        order.push(node);
      }
      path.push(node);
      siblings = node.children;
      order = node.order;
    }
    leafPaths.push(path);
  });

  // Iterative DFS: batches of long agent contexts would overflow the stack if recursed.
  const tokens: number[] = [];
  const parents: number[] = [];
  const positions: number[] = [];
  const stack: { node: TrieNode; parent: number; depth: number }[] = [];
  for (let i = roots.length - 1; i >= 0; i--) stack.push({ node: roots[i] as TrieNode, parent: -1, depth: 0 });
  while (stack.length > 0) {
    const { node, parent, depth } = stack.pop() as { node: TrieNode; parent: number; depth: number };
    node.index = tokens.length;
    tokens.push(node.token);
    parents.push(parent);
    positions.push(depth);
    for (let i = node.order.length - 1; i >= 0; i--) stack.push({ node: node.order[i] as TrieNode, parent: node.index, depth: depth + 1 });
  }

  const terms = {
    node: new Int32Array(nTerms),
    target: new Int32Array(nTerms),
    sample: new Int32Array(nTerms),
    advantage: new Float32Array(nTerms),
    oldLogprob: new Float32Array(nTerms),
    weight: new Float32Array(nTerms),
  };
  const termToken = new Int32Array(nTerms);
  const samplePaths: Int32Array[] = [];
  let j = 0;
  samples.forEach((s, si) => {
    const path = Int32Array.from(leafPaths[si] as TrieNode[], (x) => x.index);
    samplePaths.push(path);
    for (let i = 1; i < path.length; i++) {
      if (s.lossMask[i] !== 1) continue;
      terms.node[j] = path[i - 1] as number;
      terms.target[j] = s.tokenIds[i] as number;
      terms.sample[j] = si;
      terms.advantage[j] = s.advantages[i] as number;
      terms.oldLogprob[j] = s.oldLogprobs[i] as number;
      terms.weight[j] = s.weights[i] as number;
      termToken[j] = i;
      j++;
    }
  });
  return {
    tree: { tokens: Int32Array.from(tokens), parents: Int32Array.from(parents), positions: Int32Array.from(positions), terms, samplePaths },
    termToken,
  };
}

/** Rebuild every sample's token ids from the tree (the inverse of {@link buildPackedTree} on tokens). */
export function unpackSamples(tree: PackedTree): number[][] {
  return tree.samplePaths.map((p) => Array.from(p, (n) => tree.tokens[n] as number));
}
