// Supervised batches for the trainer: token sequences with a loss mask (1 on the tokens to imitate, e.g.
// golden assistant turns) packed as a prefix tree, each masked token weighing 1/Σ masked tokens, so
// the SFT loss is the mean negative log-likelihood per trained token.
import { ArborError } from "../core/errors.js";
import { buildPackedTree } from "../batch/tree/build-tree.js";
import type { TrainBatch } from "../trainer/trainer.js";

/** One supervised sequence: tokens and a 0/1 mask of those that carry loss (the first must be 0). */
export interface SftSequence {
  tokenIds: readonly number[];
  lossMask: readonly number[];
}

/** Pack sequences into an SFT {@link TrainBatch}. Throws ArborError when no token carries loss. */
export function sftBatch(sequences: readonly SftSequence[]): TrainBatch {
  let total = 0;
  for (const s of sequences) for (const m of s.lossMask) total += m === 1 ? 1 : 0;
  if (total === 0) throw new ArborError("sft: no token of the batch has loss mask 1", "trainer");
  const { tree } = buildPackedTree(
    sequences.map((s) => ({
      tokenIds: s.tokenIds,
      lossMask: s.lossMask,
      advantages: s.tokenIds.map(() => 0),
      oldLogprobs: s.tokenIds.map(() => 0),
      weights: s.lossMask.map((m) => (m === 1 ? 1 / total : 0)),
    })),
  );
  return { tree, loss: "sft" };
}
