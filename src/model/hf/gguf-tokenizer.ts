// A GGUF's tokenizer metadata (`tokenizer.ggml.*`, `tokenizer.chat_template`) as one typed value: read
// and checked from a GGUF's metadata for the Hugging Face export, and written back as GGUF metadata by
// the conversion, so both directions agree on every key, its type and its meaning.

import type { MetaValue } from "../gguf.js";

/** GGUF token types (llama.cpp `llama_token_type`). */
export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

/** The tokenizer of a GGUF: an SPM ("llama") or byte-level BPE ("gpt2") vocabulary and its specials. */
export interface GgufTokenizer {
  model: "llama" | "gpt2";
  /** `tokenizer.ggml.pre` (byte-level BPE pre-tokenizer type); absent for SPM. */
  pre?: string;
  tokens: string[];
  types: number[];
  /** SPM piece scores (absent for byte-level BPE). */
  scores?: number[];
  /** Byte-level BPE merges, "left right", highest priority first. */
  merges?: string[];
  bosId?: number;
  eosId?: number;
  unkId?: number;
  padId?: number;
  eotId?: number;
  addBos?: boolean;
  addEos?: boolean;
  addSpacePrefix?: boolean;
  chatTemplate?: string;
}

/** Read and check the tokenizer of a GGUF's metadata; errors name `source` and the key. */
export function readGgufTokenizer(metadata: Map<string, unknown>, source: string): GgufTokenizer {
  const model = metadata.get("tokenizer.ggml.model");
  if (model !== "llama" && model !== "gpt2") {
    throw new Error(`${source}: tokenizer.ggml.model '${String(model)}' is not supported (SPM 'llama' and byte-level BPE 'gpt2' are)`);
  }
  const strings = (key: string, required: boolean): string[] | undefined => {
    const v = metadata.get(key);
    if (v === undefined && !required) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) throw new Error(`${source}: ${key}: missing or not an array of strings`);
    return v as string[];
  };
  const numbers = (key: string, required: boolean): number[] | undefined => {
    const v = metadata.get(key);
    if (v === undefined && !required) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "number")) throw new Error(`${source}: ${key}: missing or not an array of numbers`);
    return v as number[];
  };
  const tokens = strings("tokenizer.ggml.tokens", true) as string[];
  const types = numbers("tokenizer.ggml.token_type", false) ?? tokens.map(() => TOKEN_TYPE.normal);
  if (types.length !== tokens.length) throw new Error(`${source}: tokenizer.ggml.token_type has ${types.length} entries, tokens has ${tokens.length}`);
  const scores = numbers("tokenizer.ggml.scores", false);
  if (scores && scores.length !== tokens.length) throw new Error(`${source}: tokenizer.ggml.scores has ${scores.length} entries, tokens has ${tokens.length}`);
  const id = (key: string): number | undefined => {
    const v = metadata.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v >= tokens.length) {
      throw new Error(`${source}: ${key} ${String(v)} is not a token id (vocabulary of ${tokens.length})`);
    }
    return v;
  };
  const flag = (key: string): boolean | undefined => {
    const v = metadata.get(key);
    if (v !== undefined && typeof v !== "boolean") throw new Error(`${source}: ${key}: not a bool`);
    return v;
  };
  const tok: GgufTokenizer = { model, tokens, types };
  const pre = metadata.get("tokenizer.ggml.pre");
  if (pre !== undefined) tok.pre = String(pre);
  if (scores) tok.scores = scores;
  if (model === "gpt2") tok.merges = strings("tokenizer.ggml.merges", true);
  const set = <K extends keyof GgufTokenizer>(k: K, v: GgufTokenizer[K] | undefined): void => {
    if (v !== undefined) tok[k] = v;
  };
  set("bosId", id("tokenizer.ggml.bos_token_id"));
  set("eosId", id("tokenizer.ggml.eos_token_id"));
  set("unkId", id("tokenizer.ggml.unknown_token_id"));
  set("padId", id("tokenizer.ggml.padding_token_id"));
  set("eotId", id("tokenizer.ggml.eot_token_id"));
  set("addBos", flag("tokenizer.ggml.add_bos_token"));
  set("addEos", flag("tokenizer.ggml.add_eos_token"));
  set("addSpacePrefix", flag("tokenizer.ggml.add_space_prefix"));
  const template = metadata.get("tokenizer.chat_template");
  if (template !== undefined) {
    if (typeof template !== "string") throw new Error(`${source}: tokenizer.chat_template: not a string`);
    tok.chatTemplate = template;
  }
  return tok;
}

/** GGUF metadata entries of a tokenizer, with the key types llama.cpp's writers use. */
export function ggufTokenizerMeta(tok: GgufTokenizer): [string, MetaValue][] {
  const meta: [string, MetaValue][] = [["tokenizer.ggml.model", { type: "string", value: tok.model }]];
  if (tok.pre !== undefined) meta.push(["tokenizer.ggml.pre", { type: "string", value: tok.pre }]);
  meta.push(["tokenizer.ggml.tokens", { type: "array", elem: "string", value: tok.tokens }]);
  if (tok.scores) meta.push(["tokenizer.ggml.scores", { type: "array", elem: "f32", value: tok.scores }]);
  meta.push(["tokenizer.ggml.token_type", { type: "array", elem: "i32", value: tok.types }]);
  if (tok.merges) meta.push(["tokenizer.ggml.merges", { type: "array", elem: "string", value: tok.merges }]);
  const ids: [string, number | undefined][] = [
    ["tokenizer.ggml.unknown_token_id", tok.unkId],
    ["tokenizer.ggml.bos_token_id", tok.bosId],
    ["tokenizer.ggml.eos_token_id", tok.eosId],
    ["tokenizer.ggml.eot_token_id", tok.eotId],
    ["tokenizer.ggml.padding_token_id", tok.padId],
  ];
  for (const [k, v] of ids) if (v !== undefined) meta.push([k, { type: "u32", value: v }]);
  const flags: [string, boolean | undefined][] = [
    ["tokenizer.ggml.add_space_prefix", tok.addSpacePrefix],
    ["tokenizer.ggml.add_bos_token", tok.addBos],
    ["tokenizer.ggml.add_eos_token", tok.addEos],
  ];
  for (const [k, v] of flags) if (v !== undefined) meta.push([k, { type: "bool", value: v }]);
  if (tok.chatTemplate !== undefined) meta.push(["tokenizer.chat_template", { type: "string", value: tok.chatTemplate }]);
  return meta;
}
