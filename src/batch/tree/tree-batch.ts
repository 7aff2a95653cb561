// A scored batch packed as a prefix tree, with everything a trainer needs to compute the loss on it:
// the tree, the ratio unit of each term (loss-spec.ts) and the loss spec itself.
import type { ScoredSample } from "../batch-sample.js";
import type { LossSpec } from "../estimators/loss-spec.js";
import { buildPackedTree } from "./build-tree.js";
import type { PackedTree } from "./packed-tree.js";
import { treeStats, type TreeStats } from "./tree-stats.js";

/** What a tree trainer consumes. */
export interface TreeBatch {
  tree: PackedTree;
  /** Ratio unit of each term: the term itself ("token"), its sample ("sequence") or its sample×chunk ("chunk"). */
  termUnit: Int32Array;
  /** Position of each term's target token in its sample. */
  termToken: Int32Array;
  loss: LossSpec;
  stats: TreeStats;
}

/** Ratio unit ids, dense from 0, for terms given by (sample, target token) pairs. */
export function ratioUnits(loss: LossSpec, samples: readonly ScoredSample[], termSample: ArrayLike<number>, termToken: ArrayLike<number>): Int32Array {
  const out = new Int32Array(termSample.length);
  const ids = new Map<string, number>();
  for (let j = 0; j < termSample.length; j++) {
    const s = termSample[j] as number;
    if (loss.ratio === "token") out[j] = j;
    else if (loss.ratio === "sequence") out[j] = s;
    else {
      const key = `${s}/${(samples[s] as ScoredSample).chunks[termToken[j] as number]}`;
      let id = ids.get(key);
      if (id === undefined) ids.set(key, (id = ids.size));
      out[j] = id;
    }
  }
  return out;
}

/** Pack scored samples into a {@link TreeBatch} (see build-tree.ts for the layout and its errors). */
export function buildTreeBatch(samples: readonly ScoredSample[], loss: LossSpec): TreeBatch {
  const { tree, termToken } = buildPackedTree(
    samples.map((s) => ({ tokenIds: s.tokenIds, lossMask: s.lossMask, advantages: s.advantages, oldLogprobs: s.oldLogprobs, weights: s.weights })),
  );
  return { tree, termUnit: ratioUnits(loss, samples, tree.terms.sample, termToken), termToken, loss, stats: treeStats(tree) };
}
