// How much a prefix tree saves: the tokens a flat (one row per sample) layout processes versus the tree's nodes.
import type { PackedTree } from "./packed-tree.js";

/** Token counts of flat versus tree layouts of one batch. */
export interface TreeStats {
  samples: number;
  /** Tokens processed by flat packing: the sum of sample lengths. */
  flatTokens: number;
  /** Tokens processed by the tree: its node count. */
  treeTokens: number;
  /** flatTokens / treeTokens (>= 1; 1 when nothing is shared). 0 for an empty batch. */
  treeTokenRatio: number;
  tokensSaved: number;
  /** tokensSaved / flatTokens. */
  savedFraction: number;
  terms: number;
}

/** Flat-versus-tree statistics of a packed tree (`tree_token_ratio` is flat tokens per tree token). */
export function treeStats(tree: PackedTree): TreeStats {
  let flatTokens = 0;
  for (const p of tree.samplePaths) flatTokens += p.length;
  const treeTokens = tree.tokens.length;
  return {
    samples: tree.samplePaths.length,
    flatTokens,
    treeTokens,
    treeTokenRatio: treeTokens === 0 ? 0 : flatTokens / treeTokens,
    tokensSaved: flatTokens - treeTokens,
    savedFraction: flatTokens === 0 ? 0 : (flatTokens - treeTokens) / flatTokens,
    terms: tree.terms.node.length,
  };
}
