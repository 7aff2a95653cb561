// Per-term logprobs of a packed batch in each layout the trainer supports:
// - "tree": one forward pass over all tree nodes with tree attention (position id = depth), then each
//   term reads the logits of its node — a fork node's logits serve every branch's term. Attention runs
//   per maximal chain over that chain's ancestors (no n² tensor), short chains merged into blocks where
//   that is cheaper than another block's op overhead (attention-mask.ts `mergeSegments`); "tree-dense" is the same with one
//   n×n mask (simplest form, for small trees and as a cross-check);
// - "flat": every sample separately, causally, positions 0..L−1 (what training without prefix merging
//   does, and the baseline the tree must match exactly).
// All return terms in the tree's term order, so the same loss code runs on any of them.
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";
import type { PackedTree } from "../batch/tree/packed-tree.js";
import { causalMask, mergeSegments, treeMask, treeSegments } from "./attention-mask.js";
import { gatherRows } from "./tf-ops.js";
import type { AttentionPlan, TinyLlama } from "./tiny-llama.js";

export type Layout = "tree" | "tree-dense" | "flat";

/** Tokens a layout runs through the model for `tree`: its nodes, or the sum of sample lengths. */
export function layoutTokens(tree: PackedTree, layout: Layout): number {
  if (layout !== "flat") return tree.tokens.length;
  return tree.samplePaths.reduce((a, p) => a + p.length, 0);
}

/** log π(target) of every term of `tree` under `model`, computed in `layout` ([terms] tensor). */
export function termLogprobs(model: TinyLlama, tree: PackedTree, layout: Layout): tf.Tensor1D {
  return termOutputs(model, tree, layout, false).logprob;
}

/**
 * Per-term logprobs and, with `withEntropy`, the policy's entropy at each term's row (token-entropy.ts), both in
 * the tree's term order from one forward pass.
 */
export function termOutputs(model: TinyLlama, tree: PackedTree, layout: Layout, withEntropy: boolean): TermOutputs {
  return layout === "flat" ? flatOutputs(model, tree, withEntropy) : treeOutputs(model, tree, layout === "tree-dense", withEntropy);
}

/** Per-term tensors of a forward pass. */
export interface TermOutputs {
  logprob: tf.Tensor1D;
  /** Present when asked for. */
  entropy?: tf.Tensor1D;
}

const none = (withEntropy: boolean): TermOutputs => (withEntropy ? { logprob: tf.zeros([0]), entropy: tf.zeros([0]) } : { logprob: tf.zeros([0]) });

function treeOutputs(model: TinyLlama, tree: PackedTree, dense: boolean, withEntropy: boolean): TermOutputs {
  if (tree.terms.node.length === 0) return none(withEntropy);
  const plan: AttentionPlan = dense ? { kind: "dense", mask: treeMask(tree.parents) } : { kind: "segments", segments: mergeSegments(treeSegments(tree.parents)) };
  const hidden = model.hidden(tree.tokens, tree.positions, plan);
  return model.termOutputs(hidden, tree.terms.node, tree.terms.target, withEntropy);
}

function flatOutputs(model: TinyLlama, tree: PackedTree, withEntropy: boolean): TermOutputs {
  const { node, sample, target } = tree.terms;
  const nTerms = node.length;
  if (nTerms === 0) return none(withEntropy);
  const bySample = new Map<number, number[]>();
  for (let j = 0; j < nTerms; j++) {
    const s = sample[j] as number;
    const list = bySample.get(s);
    if (list) list.push(j);
    else bySample.set(s, [j]);
  }
  const parts: tf.Tensor1D[] = [];
  const entropyParts: tf.Tensor1D[] = [];
  const order: number[] = [];
  for (const [s, terms] of bySample) {
    const path = tree.samplePaths[s];
    if (!path) throw new ArborError(`trainer: term sample ${s} has no path (batch has ${tree.samplePaths.length} samples)`, "trainer");
    const tokens = Array.from(path, (n) => tree.tokens[n] as number);
    const positions = Int32Array.from(path, (_, i) => i);
    // A term on node n reads the logits at n's index in the sample, which is its depth in the tree.
    const rows = terms.map((j) => {
      const row = tree.positions[node[j] as number] as number;
      if (path[row] !== node[j]) throw new ArborError(`trainer: term ${j} sits on node ${node[j]}, which is not on sample ${s}'s path`, "trainer");
      return row;
    });
    const hidden = model.hidden(tokens, positions, { kind: "dense", mask: causalMask(tokens.length) });
    const out = model.termOutputs(hidden, rows, terms.map((j) => target[j] as number), withEntropy);
    parts.push(out.logprob);
    if (out.entropy) entropyParts.push(out.entropy);
    order.push(...terms);
  }
  // `order[i]` is the term of concatenated row i; invert it to put rows back in term order.
  const inverse = new Int32Array(nTerms);
  order.forEach((j, i) => (inverse[j] = i));
  const idx = tf.tensor1d(inverse, "int32");
  const logprob = gatherRows(tf.concat(parts), idx);
  return withEntropy ? { logprob, entropy: tf.gather(tf.concat(entropyParts), idx) } : { logprob };
}
