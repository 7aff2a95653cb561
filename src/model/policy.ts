// Materialise the tiny policy for a run: a GGUF named by a hash of its init config, created once
// from seeded random weights and re-used afterwards.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../core/rng.js";
import { tinyConfig, type TinyLlamaConfig } from "./config.js";
import { writeGguf } from "./gguf.js";
import { Vocab } from "./vocab.js";
import { initWeights } from "./weights.js";

/** Bump when the vocabulary, the init scheme or the GGUF layout changes, so old files are not re-used. */
export const POLICY_FORMAT = 1;

/** `RunConfig["model"]["init"]`: the policy's shape and the seed of its weights. */
export type PolicyInit = Pick<TinyLlamaConfig, "nEmbd" | "nLayer" | "nHead" | "nHeadKv" | "nFf" | "contextLength"> & { seed: number };

/** File name of the policy for an init config: `policy-<hash>.gguf`. */
export function policyFileName(init: PolicyInit): string {
  const canonical = JSON.stringify([
    POLICY_FORMAT,
    init.seed,
    init.nEmbd,
    init.nLayer,
    init.nHead,
    init.nHeadKv,
    init.nFf,
    init.contextLength,
  ]);
  return `policy-${createHash("sha256").update(canonical).digest("hex").slice(0, 12)}.gguf`;
}

/** The model config of `init` over a vocabulary of `nVocab` tokens; a RangeError for a non-integer seed. */
export function initConfig(init: PolicyInit, nVocab: number): TinyLlamaConfig {
  if (!Number.isInteger(init.seed)) throw new RangeError(`model.init.seed: must be an integer (got ${init.seed})`);
  return tinyConfig({
    nVocab,
    nEmbd: init.nEmbd,
    nLayer: init.nLayer,
    nHead: init.nHead,
    nHeadKv: init.nHeadKv,
    nFf: init.nFf,
    contextLength: init.contextLength,
  });
}

/**
 * Return the GGUF policy for `init` in `dir`, creating it (seeded random weights, policy version 0)
 * when absent. Deterministic: the same init always yields the same, byte-identical file.
 */
export function ensurePolicy(dir: string, init: PolicyInit): { path: string; config: TinyLlamaConfig; created: boolean } {
  const vocab = new Vocab();
  const config = initConfig(init, vocab.size);
  const path = join(dir, policyFileName(init));
  if (existsSync(path)) return { path, config, created: false };
  mkdirSync(dir, { recursive: true });
  writeGguf(path, {
    config,
    vocab,
    tensors: initWeights(config, new Rng(init.seed)),
    metadata: { "general.name": "arbor-tiny-llama", "arbor.policy_version": 0, "arbor.init_seed": String(init.seed) },
  });
  return { path, config, created: true };
}
