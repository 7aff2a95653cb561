// Bounding the trainer's memory per step: a packed batch is split by sample into micro-batches whose
// estimated tape (activations kept for the backward pass) fits a byte budget, and the trainer sums their
// losses and gradients before one clip and one Adam update (gradient accumulation). The split is exact:
// every loss term belongs to one sample, ratio units (sequence, chunk) and the mismatch mask never span
// samples, and each term's weight already carries the batch-wide normaliser (loss-spec.ts), so the batch
// loss is the plain sum of the micro-batches' losses. Without it a large batch (32 calc programs in the flat
// layout, or long search-qa conversations) outgrows the wasm heap and tfjs aborts with "memory access out of
// bounds". Also here: the context check — no sample may be longer than the model was built for.
import { ArborError } from "../core/errors.js";
import type { PackedTree } from "../batch/tree/packed-tree.js";
import { headDim, type TinyLlamaConfig } from "../model/config.js";
import type { Layout } from "./layouts.js";

/**
 * Default estimated bytes of one micro-batch's pass. The wasm heap cannot exceed 4 GiB and never shrinks;
 * 1 GiB leaves room for the weights, Adam's state and the allocator's slack.
 */
export const DEFAULT_MAX_STEP_BYTES = 1024 * 1024 * 1024;

/** One micro-batch: a sub-tree of some samples and where its terms sit in the full batch. */
export interface MicroBatch {
  tree: PackedTree;
  /** Index in the full batch of each of this micro-batch's terms (in its term order). */
  terms: Int32Array;
  /** Samples of the full batch it holds. */
  samples: number[];
  /** Its estimated tape bytes. */
  bytes: number;
}

/**
 * Throws an ArborError naming the first sample longer than the model's context (`contextLength`) and both
 * lengths. Positions past the context were never trained and llama.cpp refuses them, so such a sample is a
 * bug upstream (an engine context larger than the model's, or unchecked SFT data), not something to guess at.
 */
export function checkContext(tree: PackedTree, contextLength: number, sampleIds?: readonly string[]): void {
  tree.samplePaths.forEach((path, s) => {
    if (path.length > contextLength) {
      const name = sampleIds?.[s] === undefined ? `sample ${s}` : `sample ${s} (${sampleIds[s]})`;
      throw new ArborError(`trainer: ${name} has ${path.length} tokens, more than the model's context of ${contextLength} tokens (contextLength); shorten or drop it before training`, "trainer");
    }
  });
}

/**
 * Estimated tape bytes of a micro-batch with `nodes` tokens run, `attention` query×key entries and `terms` loss
 * terms; `entropy`: the pass also reads the policy's token entropy (token-entropy.ts), two more [terms, vocab]
 * tensors held in the same gradient scope.
 */
function tapeBytes(cfg: TinyLlamaConfig, nodes: number, attention: number, terms: number, entropy: boolean): number {
  const hd = headDim(cfg);
  // Per layer and token: norms, q/k/v/o and their RoPE copies, the residuals, gate/up/act/down. Per layer and
  // attention entry: scores, masked scores, softmax and their reshapes, for each head. Counted, these come to
  // about a third of what the wasm heap grows to in a step (measured 2.6–3.3× for the shipped 2-layer shape,
  // flat 1×2048, 2×1024 and 8×256 tokens: the backward pass holds gradients of the same size alongside), hence ×3.
  const perToken = cfg.nLayer * (12 * cfg.nEmbd + 4 * cfg.nHead * hd + 5 * cfg.nFf);
  const perEntry = cfg.nLayer * 4 * cfg.nHead + 2; // + the additive mask (Float32Array and its tensor)
  // Per term: logits, log-softmax, the target's one-hot and its product; the entropy adds exp(log-softmax) and
  // its product with the log-softmax (entropyOfLogSoftmax).
  const perTerm = (entropy ? 6 : 4) * cfg.nVocab;
  return 3 * 4 * (perToken * nodes + perEntry * attention + perTerm * terms);
}

/**
 * Split `tree` into micro-batches of consecutive samples (samples of one group are adjacent, so their shared
 * prefixes stay in one sub-tree) whose estimated tape fits `maxBytes`; one micro-batch when it all fits.
 * A sample that alone exceeds the budget gets a micro-batch of its own. `opts.entropy`: the passes also compute
 * the policy's token entropy (the step's first epoch), whose tensors count too.
 */
export function planMicroBatches(tree: PackedTree, cfg: TinyLlamaConfig, layout: Layout, maxBytes: number, opts: { entropy?: boolean } = {}): MicroBatch[] {
  const entropy = opts.entropy === true;
  if (!(maxBytes > 0)) throw new ArborError(`trainer: maxStepBytes must be > 0, got ${maxBytes}`, "config");
  const nSamples = tree.samplePaths.length;
  const termsOf = new Int32Array(nSamples);
  for (const s of tree.terms.sample) termsOf[s] = (termsOf[s] as number) + 1;
  const groups: { samples: number[]; bytes: number }[] = [];
  let current: number[] = [];
  let seen = new Uint8Array(tree.tokens.length);
  let nodes = 0;
  let attention = 0;
  let terms = 0;
  const cost = (s: number): { nodes: number; attention: number } => {
    const path = tree.samplePaths[s] as Int32Array;
    if (layout === "flat") return { nodes: path.length, attention: path.length * path.length };
    // Tree attention runs per chain over the chain's ancestors: a node at depth d costs at most 2(d+1) entries.
    let n = 0;
    let a = 0;
    for (const node of path) {
      if (seen[node] === 1) continue;
      n++;
      a += 2 * ((tree.positions[node] as number) + 1);
    }
    return { nodes: n, attention: a };
  };
  for (let s = 0; s < nSamples; s++) {
    const c = cost(s);
    const next = tapeBytes(cfg, nodes + c.nodes, attention + c.attention, terms + (termsOf[s] as number), entropy);
    if (current.length > 0 && next > maxBytes) {
      groups.push({ samples: current, bytes: tapeBytes(cfg, nodes, attention, terms, entropy) });
      current = [];
      seen = new Uint8Array(tree.tokens.length);
      terms = 0;
      const fresh = cost(s);
      nodes = fresh.nodes;
      attention = fresh.attention;
    } else {
      nodes += c.nodes;
      attention += c.attention;
    }
    terms += termsOf[s] as number;
    current.push(s);
    for (const node of tree.samplePaths[s] as Int32Array) seen[node] = 1;
  }
  if (current.length > 0) groups.push({ samples: current, bytes: tapeBytes(cfg, nodes, attention, terms, entropy) });
  if (groups.length <= 1) {
    return [{ tree, terms: Int32Array.from({ length: tree.terms.node.length }, (_, j) => j), samples: Array.from({ length: nSamples }, (_, s) => s), bytes: groups[0]?.bytes ?? 0 }];
  }
  return groups.map((g) => ({ ...subTree(tree, g.samples), samples: g.samples, bytes: g.bytes }));
}

/**
 * The sub-tree of `samples` (indices into `tree.samplePaths`, ascending): the nodes on their paths in the
 * same pre-order, their terms in the same order, samples renumbered 0..k−1. `terms` maps back to the full batch.
 */
export function subTree(tree: PackedTree, samples: readonly number[]): { tree: PackedTree; terms: Int32Array } {
  const n = tree.tokens.length;
  const index = new Int32Array(n).fill(-1);
  for (const s of samples) {
    const path = tree.samplePaths[s];
    if (!path) throw new ArborError(`trainer: no sample ${s} (batch has ${tree.samplePaths.length})`, "trainer");
    for (const node of path) index[node] = 0;
  }
  let kept = 0;
  for (let i = 0; i < n; i++) if (index[i] === 0) index[i] = kept++;
  const tokens = new Int32Array(kept);
  const parents = new Int32Array(kept);
  const positions = new Int32Array(kept);
  for (let i = 0; i < n; i++) {
    const k = index[i] as number;
    if (k < 0) continue;
    tokens[k] = tree.tokens[i] as number;
    const p = tree.parents[i] as number;
    parents[k] = p < 0 ? -1 : (index[p] as number);
    positions[k] = tree.positions[i] as number;
  }
  const renumber = new Map(samples.map((s, i) => [s, i]));
  const picked: number[] = [];
  for (let j = 0; j < tree.terms.node.length; j++) if (renumber.has(tree.terms.sample[j] as number)) picked.push(j);
  const t = tree.terms;
  const take = <A extends Int32Array | Float32Array>(a: A, make: (len: number) => A, map: (v: number) => number = (v) => v): A => {
    const out = make(picked.length);
    picked.forEach((j, i) => (out[i] = map(a[j] as number)));
    return out;
  };
  return {
    tree: {
      tokens,
      parents,
      positions,
      terms: {
        node: take(t.node, (l) => new Int32Array(l), (v) => index[v] as number),
        target: take(t.target, (l) => new Int32Array(l)),
        sample: take(t.sample, (l) => new Int32Array(l), (v) => renumber.get(v) as number),
        advantage: take(t.advantage, (l) => new Float32Array(l)),
        oldLogprob: take(t.oldLogprob, (l) => new Float32Array(l)),
        weight: take(t.weight, (l) => new Float32Array(l)),
      },
      samplePaths: samples.map((s) => Int32Array.from(tree.samplePaths[s] as Int32Array, (node) => index[node] as number)),
    },
    terms: Int32Array.from(picked),
  };
}
