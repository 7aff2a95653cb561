// The registry of JS tokenizers by GGUF tokenizer model: "llama" (SentencePiece) and "gpt2"
// (byte-level BPE). Given a GGUF's tokenizer metadata, it builds the tokenizer whose ids equal
// llama.cpp's for that file.

import { tokenizerSpecFromGguf, type GgufTokenizerModel, type GgufTokenizerSpec } from "../gguf-tokenizer.js";
import type { ModelTokenizer } from "../tokenizer.js";
import { BpeTokenizer } from "./bpe-tokenizer.js";
import { SpmTokenizer } from "./spm-tokenizer.js";

const FACTORIES: Record<GgufTokenizerModel, (spec: GgufTokenizerSpec) => ModelTokenizer> = {
  llama: (spec) => new SpmTokenizer(spec),
  gpt2: (spec) => new BpeTokenizer(spec),
};

/** The JS tokenizer of a GGUF tokenizer spec; throws naming the model when none is registered. */
export function tokenizerFromSpec(spec: GgufTokenizerSpec): ModelTokenizer {
  const make = FACTORIES[spec.model];
  if (make === undefined) throw new RangeError(`tokenizer.model '${String(spec.model)}' has no JS tokenizer (known: ${Object.keys(FACTORIES).join(", ")})`);
  return make(spec);
}

/** The JS tokenizer of a GGUF's metadata (`readGguf(path).metadata`): ids equal llama.cpp's for that file. */
export function tokenizerFromGguf(metadata: ReadonlyMap<string, unknown>): ModelTokenizer {
  return tokenizerFromSpec(tokenizerSpecFromGguf(metadata));
}
