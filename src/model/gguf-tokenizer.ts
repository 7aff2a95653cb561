// A model's tokenizer as GGUF metadata, in general: SentencePiece ("llama") and GPT-2-style
// byte-level BPE ("gpt2") vocabularies, their special ids and flags, and the chat template. Key names
// and value types are exactly those llama.cpp reads (src/llama-vocab.cpp, gguf-py/gguf/constants.py):
// ids are u32, flags bool, tokens and merges string arrays, scores f32, token types i32.

import type { MetaValue } from "./gguf-meta.js";

/** GGUF `tokenizer.ggml.model` values Arbor writes and reads: SentencePiece or byte-level BPE. */
export type GgufTokenizerModel = "llama" | "gpt2";

/** A tokenizer as a GGUF file stores it. Optional fields are absent keys (llama.cpp's defaults apply). */
export interface GgufTokenizerSpec {
  /** `tokenizer.ggml.model`: "llama" (SPM) or "gpt2" (byte-level BPE). */
  model: GgufTokenizerModel;
  /** `tokenizer.ggml.pre`: llama.cpp's pre-tokenizer name ("qwen2", "gpt-2", "llama-bpe", …); BPE only. */
  pre?: string;
  /** `tokenizer.ggml.tokens`: the piece of every id. */
  tokens: string[];
  /** `tokenizer.ggml.token_type`: llama_token_type of every id (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte). */
  types: number[];
  /** `tokenizer.ggml.scores`: SPM merge priorities (higher merges first). */
  scores?: number[];
  /** `tokenizer.ggml.merges`: BPE merges "left right", highest priority first. */
  merges?: string[];
  bosId?: number;
  eosId?: number;
  eotId?: number;
  eomId?: number;
  unkId?: number;
  padId?: number;
  /** `tokenizer.ggml.add_bos_token`. */
  addBos?: boolean;
  /** `tokenizer.ggml.add_eos_token`. */
  addEos?: boolean;
  /** `tokenizer.ggml.add_space_prefix` (SPM: prefix raw text with a space). */
  addSpacePrefix?: boolean;
  /** `tokenizer.chat_template`: the Jinja chat template. */
  chatTemplate?: string;
}

/** GGUF keys of the tokenizer, as llama.cpp names them. */
export const TokenizerKey = {
  model: "tokenizer.ggml.model",
  pre: "tokenizer.ggml.pre",
  tokens: "tokenizer.ggml.tokens",
  types: "tokenizer.ggml.token_type",
  scores: "tokenizer.ggml.scores",
  merges: "tokenizer.ggml.merges",
  bosId: "tokenizer.ggml.bos_token_id",
  eosId: "tokenizer.ggml.eos_token_id",
  eotId: "tokenizer.ggml.eot_token_id",
  eomId: "tokenizer.ggml.eom_token_id",
  unkId: "tokenizer.ggml.unknown_token_id",
  padId: "tokenizer.ggml.padding_token_id",
  addBos: "tokenizer.ggml.add_bos_token",
  addEos: "tokenizer.ggml.add_eos_token",
  addSpacePrefix: "tokenizer.ggml.add_space_prefix",
  chatTemplate: "tokenizer.chat_template",
} as const;

const ID_FIELDS = ["unkId", "bosId", "eosId", "eotId", "eomId", "padId"] as const;
const FLAG_FIELDS = ["addSpacePrefix", "addBos", "addEos"] as const;

/** Throws a RangeError naming the field when `spec` is not a tokenizer llama.cpp can load. */
export function validateTokenizerSpec(spec: GgufTokenizerSpec): void {
  if (spec.model !== "llama" && spec.model !== "gpt2") {
    throw new RangeError(`tokenizer.model: '${String(spec.model)}' is not supported (use "llama" or "gpt2")`);
  }
  const n = spec.tokens.length;
  if (n === 0) throw new RangeError("tokenizer.tokens: empty vocabulary");
  if (spec.types.length !== n) throw new RangeError(`tokenizer.types: ${spec.types.length} types for ${n} tokens`);
  spec.types.forEach((t, i) => {
    if (!Number.isInteger(t) || t < 1 || t > 6) throw new RangeError(`tokenizer.types[${i}]: ${t} is not a llama_token_type (1..6)`);
  });
  const seen = new Map<string, number>();
  spec.tokens.forEach((t, i) => {
    const prev = seen.get(t);
    if (prev !== undefined) throw new RangeError(`tokenizer.tokens[${i}]: '${t}' repeats tokens[${prev}]`);
    seen.set(t, i);
  });
  if (spec.scores !== undefined) {
    if (spec.scores.length !== n) throw new RangeError(`tokenizer.scores: ${spec.scores.length} scores for ${n} tokens`);
    spec.scores.forEach((s, i) => {
      if (!Number.isFinite(s)) throw new RangeError(`tokenizer.scores[${i}]: ${s} is not finite`);
    });
  }
  if (spec.model === "gpt2") {
    if (spec.merges === undefined) throw new RangeError("tokenizer.merges: a gpt2 (BPE) tokenizer needs merges");
    if (spec.pre === undefined) throw new RangeError("tokenizer.pre: a gpt2 (BPE) tokenizer needs a pre-tokenizer name");
    spec.merges.forEach((m, i) => {
      if (m.indexOf(" ", 1) < 0) throw new RangeError(`tokenizer.merges[${i}]: '${m}' is not "left right"`);
    });
  } else if (spec.merges !== undefined) {
    throw new RangeError("tokenizer.merges: only gpt2 (BPE) tokenizers have merges");
  }
  for (const f of ID_FIELDS) {
    const id = spec[f];
    if (id !== undefined && (!Number.isInteger(id) || id < 0 || id >= n)) throw new RangeError(`tokenizer.${f}: ${id} is outside the vocabulary (size ${n})`);
  }
}

/**
 * The tokenizer's GGUF metadata, in the order Arbor writes it: model, pre, tokens, scores, token
 * types, merges, special ids, flags, chat template. Absent optional fields write no key.
 */
export function tokenizerMetadata(spec: GgufTokenizerSpec): [string, MetaValue][] {
  validateTokenizerSpec(spec);
  // llama.cpp loads an empty piece under another name, so the file would not say what it means.
  const empty = spec.tokens.indexOf("");
  if (empty >= 0) throw new RangeError(`tokenizer.tokens[${empty}]: empty piece`);
  const meta: [string, MetaValue][] = [[TokenizerKey.model, { type: "string", value: spec.model }]];
  if (spec.pre !== undefined) meta.push([TokenizerKey.pre, { type: "string", value: spec.pre }]);
  meta.push([TokenizerKey.tokens, { type: "array", elem: "string", value: spec.tokens }]);
  if (spec.scores !== undefined) meta.push([TokenizerKey.scores, { type: "array", elem: "f32", value: spec.scores }]);
  meta.push([TokenizerKey.types, { type: "array", elem: "i32", value: spec.types }]);
  if (spec.merges !== undefined) meta.push([TokenizerKey.merges, { type: "array", elem: "string", value: spec.merges }]);
  for (const f of ID_FIELDS) {
    const id = spec[f];
    if (id !== undefined) meta.push([TokenizerKey[f], { type: "u32", value: id }]);
  }
  for (const f of FLAG_FIELDS) {
    const v = spec[f];
    if (v !== undefined) meta.push([TokenizerKey[f], { type: "bool", value: v }]);
  }
  if (spec.chatTemplate !== undefined) meta.push([TokenizerKey.chatTemplate, { type: "string", value: spec.chatTemplate }]);
  return meta;
}

/**
 * The tokenizer of a GGUF's metadata (as `readGguf` or `readGgufMetadata` return it). Throws naming
 * `source` (the file) and the key when the tokenizer is missing, of another kind ("bert", "t5", …)
 * or malformed.
 */
export function tokenizerSpecFromGguf(metadata: ReadonlyMap<string, unknown>, source = "GGUF"): GgufTokenizerSpec {
  const model = metadata.get(TokenizerKey.model);
  if (model === undefined) throw new Error(`${source}: metadata ${TokenizerKey.model}: missing (the file has no tokenizer)`);
  if (model !== "llama" && model !== "gpt2") {
    throw new Error(`${source}: metadata ${TokenizerKey.model}: '${String(model)}' is not supported (Arbor reads "llama" and "gpt2" tokenizers)`);
  }
  const spec: GgufTokenizerSpec = {
    model,
    tokens: stringArray(metadata, TokenizerKey.tokens, true, source) as string[],
    types: [],
  };
  const types = numberArray(metadata, TokenizerKey.types, source);
  // llama.cpp treats a missing token_type array as all NORMAL.
  spec.types = types ?? spec.tokens.map(() => 1);
  const pre = metadata.get(TokenizerKey.pre);
  if (pre !== undefined) {
    if (typeof pre !== "string") throw new Error(`${source}: metadata ${TokenizerKey.pre}: not a string`);
    spec.pre = pre;
  }
  const scores = numberArray(metadata, TokenizerKey.scores, source);
  if (scores !== undefined) spec.scores = scores;
  const merges = stringArray(metadata, TokenizerKey.merges, false, source);
  if (merges !== undefined) spec.merges = merges;
  for (const f of ID_FIELDS) {
    const v = metadata.get(TokenizerKey[f]);
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isInteger(v)) throw new Error(`${source}: metadata ${TokenizerKey[f]}: not an integer id`);
    spec[f] = v;
  }
  for (const f of FLAG_FIELDS) {
    const v = metadata.get(TokenizerKey[f]);
    if (v === undefined) continue;
    if (typeof v !== "boolean") throw new Error(`${source}: metadata ${TokenizerKey[f]}: not a bool`);
    spec[f] = v;
  }
  const template = metadata.get(TokenizerKey.chatTemplate);
  if (template !== undefined) {
    if (typeof template !== "string") throw new Error(`${source}: metadata ${TokenizerKey.chatTemplate}: not a string`);
    spec.chatTemplate = template;
  }
  try {
    validateTokenizerSpec(spec);
  } catch (err) {
    throw new Error(`${source}: ${(err as Error).message}`, { cause: err });
  }
  return spec;
}

function stringArray(metadata: ReadonlyMap<string, unknown>, key: string, required: boolean, source: string): string[] | undefined {
  const v = metadata.get(key);
  if (v === undefined) {
    if (required) throw new Error(`${source}: metadata ${key}: missing`);
    return undefined;
  }
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) throw new Error(`${source}: metadata ${key}: not an array of strings`);
  return v as string[];
}

function numberArray(metadata: ReadonlyMap<string, unknown>, key: string, source: string): number[] | undefined {
  const v = metadata.get(key);
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== "number")) throw new Error(`${source}: metadata ${key}: not an array of numbers`);
  return v as number[];
}
