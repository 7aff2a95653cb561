// Packed prefix-tree layout shared by the batch builder (src/batch/tree) and trainers (src/trainer, external).
//
// Convention (why the term sits on the parent): a causal LM's logits at position t predict the token at
// position t+1. In the tree, the logits computed at node `n` predict the token of a child of `n`. So a loss
// term for "sample s emits token y" lives on the node of the token BEFORE y (`node`), with `target` = y.
// The node holding y itself is `samplePaths[s][i+1]`. A fork node (several distinct children) therefore
// carries one term per distinct branch AND per sample passing through it, so the tree loss is exactly the
// sum of the per-sample losses (no averaging over shared prefixes).
// The first token of a sample has no predictor and never gets a term.

/** A batch merged into a token trie, packed in DFS pre-order (a parent always precedes its children). */
export interface PackedTree {
  tokens: Int32Array; // token id of each node
  parents: Int32Array; // index of the parent node, -1 for roots
  positions: Int32Array; // depth of the node = position id (0 for roots)
  /** Loss terms: node `node` predicts token `target` for sample `sample` (one term per sample token with
   *  lossMask 1, so a fork node carries one term per distinct branch *and per sample*: exactness). */
  terms: {
    node: Int32Array;
    target: Int32Array;
    sample: Int32Array;
    advantage: Float32Array;
    oldLogprob: Float32Array;
    weight: Float32Array;
  };
  /** For each sample: node index of each of its tokens (to rebuild the sample / check exactness). */
  samplePaths: Int32Array[];
}
