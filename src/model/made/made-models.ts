// Made-here models with real-style tokenizers, for running Arbor end to end on something shaped like
// the models teams train, with no download: a llama-architecture GGUF with seeded random weights and
// either the byte-level BPE + ChatML vocabulary (Qwen-like, "bpe-chatml") or the SentencePiece +
// Llama-3 vocabulary ("spm-llama3"), the chat template in `tokenizer.chat_template`. Named by a hash
// like the tiny policy (`ensurePolicy`): created once, byte-identical for the same init.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../../core/rng.js";
import type { TinyLlamaConfig } from "../config.js";
import { writeGguf } from "../gguf.js";
import { tokenizerMetadata, type GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { initConfig, type PolicyInit } from "../policy.js";
import type { ModelTokenizer } from "../tokenizer.js";
import { initWeights } from "../weights.js";
import { bpeChatmlSpec } from "./bpe-vocab.js";
import { spmLlama3Spec } from "./spm-vocab.js";
import { tokenizerFromSpec } from "./tokenizer-from-spec.js";

/** The made-here model kinds. */
export const MADE_MODEL_KINDS = ["bpe-chatml", "spm-llama3"] as const;
export type MadeModelKind = (typeof MADE_MODEL_KINDS)[number];

/** Bump when the weights' init or the file layout changes (vocabulary changes change the hash by themselves). */
export const MADE_MODEL_FORMAT = 2;

const SPECS: Record<MadeModelKind, () => GgufTokenizerSpec> = {
  "bpe-chatml": bpeChatmlSpec,
  "spm-llama3": spmLlama3Spec,
};

/** The tokenizer spec (vocabulary, specials, template) of a made-here kind. */
export function madeTokenizerSpec(kind: MadeModelKind): GgufTokenizerSpec {
  const spec = SPECS[kind];
  if (spec === undefined) throw new RangeError(`made model kind '${String(kind)}' is unknown (known: ${MADE_MODEL_KINDS.join(", ")})`);
  return spec();
}

/**
 * File name of a made model: `<kind>-<hash of format, init and tokenizer>.gguf`. `spec` is the
 * kind's tokenizer when the caller has built it already (building the BPE vocabulary trains it).
 */
export function madeModelFileName(kind: MadeModelKind, init: PolicyInit, spec: GgufTokenizerSpec = madeTokenizerSpec(kind)): string {
  const h = createHash("sha256");
  h.update(JSON.stringify([MADE_MODEL_FORMAT, kind, init.seed, init.nEmbd, init.nLayer, init.nHead, init.nHeadKv, init.nFf, init.contextLength]));
  h.update(JSON.stringify(tokenizerMetadata(spec)));
  return `${kind}-${h.digest("hex").slice(0, 12)}.gguf`;
}

/**
 * Return the made model `kind` for `init` in `dir`, creating it when absent (seeded random weights,
 * policy version 0). Deterministic: the same kind and init always yield the same, byte-identical file.
 */
export function makeModel(
  kind: MadeModelKind,
  dir: string,
  init: PolicyInit,
): { path: string; config: TinyLlamaConfig; tokenizer: ModelTokenizer; spec: GgufTokenizerSpec; created: boolean } {
  const spec = madeTokenizerSpec(kind);
  const config = initConfig(init, spec.tokens.length);
  const path = join(dir, madeModelFileName(kind, init, spec));
  const tokenizer = tokenizerFromSpec(spec);
  if (existsSync(path)) return { path, config, tokenizer, spec, created: false };
  mkdirSync(dir, { recursive: true });
  writeGguf(path, {
    config,
    tokenizer: spec,
    tensors: initWeights(config, new Rng(init.seed)),
    metadata: { "general.name": `arbor-made-${kind}`, "arbor.policy_version": 0, "arbor.init_seed": String(init.seed), "arbor.made_model": kind },
  });
  return { path, config, tokenizer, spec, created: true };
}
