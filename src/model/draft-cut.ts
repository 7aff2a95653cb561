// A draft model for speculative decoding before any alignment (policy version 0): the policy cut to its first
// `layers` blocks, keeping its embedding, final norm, output head and vocabulary (the starting weights the
// reference trainer's draft distiller begins from, trainer/draft-distiller.ts `truncatedPolicy`). It proposes
// tokens the policy tends to agree with at once; `train.draftModel` then distils it after every step.
import { configFromGguf, readGguf, writeGguf } from "./gguf.js";
import { tokenizerSpecFromGguf } from "./gguf-tokenizer.js";
import { ArborError } from "../core/errors.js";

/**
 * Write to `outPath` the policy GGUF at `policyPath` cut to its first `layers` blocks (all of them when it
 * has no more). Throws ArborError "config" naming the file when it is not a llama GGUF Arbor can read.
 */
export function cutDraftModel(policyPath: string, outPath: string, layers: number): { layers: number } {
  if (!Number.isInteger(layers) || layers < 1) throw new ArborError(`draft model: layers must be an integer >= 1, got ${layers}`, "config");
  let f: ReturnType<typeof readGguf>;
  let config: ReturnType<typeof configFromGguf>;
  try {
    f = readGguf(policyPath);
    config = configFromGguf(f.metadata, policyPath);
  } catch (err) {
    throw new ArborError(`draft model: cannot cut a draft from ${policyPath}: ${(err as Error).message}; set speculative.draftModel to a draft GGUF`, "config");
  }
  const kept = Math.min(layers, config.nLayer);
  writeGguf(outPath, {
    config: { ...config, nLayer: kept },
    tokenizer: tokenizerSpecFromGguf(f.metadata, policyPath),
    tensors: f.tensors.filter((t) => {
      const m = /^blk\.(\d+)\./.exec(t.name);
      return m === null || Number(m[1]) < kept;
    }),
  });
  return { layers: kept };
}
