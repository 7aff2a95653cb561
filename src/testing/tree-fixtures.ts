// Arbitrary and hand-made tree inputs for the tree tests.
import fc from "fast-check";
import type { TreeSampleInput } from "../batch/tree/build-tree.js";

/** A tree input whose per-token values derive from `seed` (so terms of different samples differ). */
export function sample(tokenIds: number[], lossMask: number[], seed = 0): TreeSampleInput {
  return {
    tokenIds,
    lossMask,
    advantages: tokenIds.map((_, i) => (lossMask[i] ? seed + 0.5 : 0)),
    oldLogprobs: tokenIds.map((_, i) => (lossMask[i] ? -(seed + i) / 8 : 0)),
    weights: tokenIds.map((_, i) => (lossMask[i] ? 1 / (seed + 2) : 0)),
  };
}

/** Arbitrary batches with shared prefixes at every depth: later samples often extend a prefix of an earlier one. */
export const batchArb = fc
  .array(
    fc.record({
      from: fc.nat(),
      cut: fc.nat(),
      tail: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 6 }),
      mask: fc.array(fc.boolean(), { maxLength: 20 }),
    }),
    { minLength: 1, maxLength: 10 },
  )
  .map((specs) => {
    const out: TreeSampleInput[] = [];
    specs.forEach((s, k) => {
      const prev = out.length > 0 ? (out[s.from % out.length] as TreeSampleInput) : undefined;
      const prefix = prev ? Array.from(prev.tokenIds).slice(0, s.cut % (prev.tokenIds.length + 1)) : [];
      const tokens = prefix.concat(s.tail);
      const mask = tokens.map((_, i) => (i > 0 && s.mask[i % Math.max(1, s.mask.length)] ? 1 : 0));
      out.push(sample(tokens, mask, k));
    });
    return out;
  });

