// Test fixture: a made-here model (src/model/made/made-models.ts) written with one thing changed —
// its seed, context length, chat template (or none) or `general.architecture` — for the engine's
// weight-switch and bad-model tests. The tokenizer and weights come from the same recipe as
// `makeModel`, so with nothing changed the file serves exactly as the made model does.
import { Rng } from "../core/rng.js";
import { tinyConfig, type TinyLlamaConfig } from "../model/config.js";
import { writeGguf, writeGgufRaw, type MetaValue } from "../model/gguf.js";
import { tokenizerMetadata, type GgufTokenizerSpec } from "../model/gguf-tokenizer.js";
import { madeTokenizerSpec, type MadeModelKind } from "../model/made/made-models.js";
import type { PolicyInit } from "../model/policy.js";
import { initWeights } from "../model/weights.js";

export interface MadeVariantOptions {
  /** Replaces the chat template; null writes none. */
  chatTemplate?: string | null;
  /** Replaces `general.architecture` and its key prefix (e.g. one llama.cpp cannot run). */
  architecture?: string;
}

/** Write `kind` for `init` (seed and context length included) to `path`, changed as `opts` says. */
export function writeMadeVariant(
  kind: MadeModelKind,
  path: string,
  init: PolicyInit,
  opts: MadeVariantOptions = {},
): { path: string; config: TinyLlamaConfig; spec: GgufTokenizerSpec } {
  const spec = madeTokenizerSpec(kind);
  if (opts.chatTemplate === null) delete spec.chatTemplate;
  else if (opts.chatTemplate !== undefined) spec.chatTemplate = opts.chatTemplate;
  const { seed, ...shape } = init;
  const config = tinyConfig({ nVocab: spec.tokens.length, ...shape });
  const tensors = initWeights(config, new Rng(seed));
  const arch = opts.architecture;
  if (arch === undefined) {
    writeGguf(path, { config, tokenizer: spec, tensors, metadata: { "general.name": `arbor-made-${kind}-variant` } });
    return { path, config, spec };
  }
  // writeGguf writes llama files only; the same keys under another architecture's prefix.
  const meta: [string, MetaValue][] = [
    ["general.architecture", { type: "string", value: arch }],
    ["general.alignment", { type: "u32", value: 32 }],
    ["general.name", { type: "string", value: `arbor-made-${kind}-variant` }],
    [`${arch}.vocab_size`, { type: "u32", value: config.nVocab }],
    [`${arch}.context_length`, { type: "u32", value: config.contextLength }],
    [`${arch}.embedding_length`, { type: "u32", value: config.nEmbd }],
    [`${arch}.block_count`, { type: "u32", value: config.nLayer }],
    [`${arch}.feed_forward_length`, { type: "u32", value: config.nFf }],
    [`${arch}.attention.head_count`, { type: "u32", value: config.nHead }],
    [`${arch}.attention.head_count_kv`, { type: "u32", value: config.nHeadKv }],
    [`${arch}.rope.dimension_count`, { type: "u32", value: config.nEmbd / config.nHead }],
    [`${arch}.attention.layer_norm_rms_epsilon`, { type: "f32", value: config.rmsEps }],
    [`${arch}.rope.freq_base`, { type: "f32", value: config.ropeFreqBase }],
    ...tokenizerMetadata(spec),
  ];
  writeGgufRaw(path, meta, tensors);
  return { path, config, spec };
}
