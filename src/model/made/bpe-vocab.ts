// The made-here GPT-2-style byte-level BPE vocabulary (Qwen-like): 256 byte-level characters in
// GPT-2's order, merges learned greedily on the built-in corpus (corpus.ts) split by the "qwen2"
// pre-tokenizer, then ChatML's control tokens and Qwen's tool/think tokens. Token types follow what
// llama.cpp's converter gives Qwen2.5/Qwen3 GGUFs: `<|endoftext|>`, `<|im_start|>`, `<|im_end|>` are
// special in tokenizer_config.json (CONTROL); `<tool_call>`, `<tool_response>`, `<think>` and their
// closers are added but not special (USER_DEFINED: always parsed, always rendered as text).

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { TokenType } from "../vocab.js";
import { BYTE_CHARS, bytesToByteLevel } from "./byte-level.js";
import { madeCorpus } from "./corpus.js";
import { preTokenizer } from "./pre-tokenize.js";
import { CHATML_TOOLS_TEMPLATE } from "./templates.js";

/** ChatML specials, in id order after the learned tokens, with their GGUF token types. */
export const BPE_SPECIALS = [
  ["<|endoftext|>", TokenType.control],
  ["<|im_start|>", TokenType.control],
  ["<|im_end|>", TokenType.control],
  ["<tool_call>", TokenType.userDefined],
  ["</tool_call>", TokenType.userDefined],
  ["<tool_response>", TokenType.userDefined],
  ["</tool_response>", TokenType.userDefined],
  ["<think>", TokenType.userDefined],
  ["</think>", TokenType.userDefined],
] as const;

/** Merges learned by default (vocabulary ≈ 256 + this + specials). */
export const BPE_MERGES = 600;

/**
 * Learn BPE merges over words given as symbol strings with their counts: count adjacent symbol pairs
 * (weighted by word frequency), merge the most frequent (ties: the smaller "left right" string),
 * repeat `nMerges` times or until no pair occurs twice. Deterministic. Returns the merges in order.
 */
export function learnMerges(wordCounts: ReadonlyMap<string, number>, nMerges: number): [string, string][] {
  const words = [...wordCounts].map(([w, n]) => ({ syms: Array.from(w), n }));
  // Pair counts kept up to date incrementally: a merge only re-counts the words that contain it.
  const pairs = new Map<string, { left: string; right: string; count: number; words: Set<number> }>();
  const count = (wi: number, sign: 1 | -1): void => {
    const { syms, n } = words[wi] as { syms: string[]; n: number };
    for (let i = 0; i + 1 < syms.length; i++) {
      const left = syms[i] as string;
      const right = syms[i + 1] as string;
      const key = `${left} ${right}`;
      let p = pairs.get(key);
      if (p === undefined) pairs.set(key, (p = { left, right, count: 0, words: new Set() }));
      p.count += sign * n;
      if (sign > 0) p.words.add(wi);
    }
  };
  words.forEach((_, wi) => count(wi, 1));
  const merges: [string, string][] = [];
  for (let m = 0; m < nMerges; m++) {
    let best: { key: string; left: string; right: string; count: number; words: Set<number> } | undefined;
    for (const [key, p] of pairs) {
      if (p.count < 2) continue;
      if (best === undefined || p.count > best.count || (p.count === best.count && key < best.key)) best = { key, ...p };
    }
    if (best === undefined) break;
    const { left, right } = best;
    const joined = left + right;
    merges.push([left, right]);
    for (const wi of [...best.words].sort((a, b) => a - b)) {
      const s = (words[wi] as { syms: string[] }).syms;
      count(wi, -1);
      for (let i = 0; i + 1 < s.length; i++) {
        if (s[i] === left && s[i + 1] === right) s.splice(i, 2, joined);
      }
      count(wi, 1);
    }
    pairs.delete(best.key);
  }
  return merges;
}

/** Byte-level BPE on `corpus` split by the named pre-tokenizer: the 256 base characters then one token per new merge. */
export function trainByteLevelBpe(corpus: string, nMerges: number, pre = "qwen2"): { tokens: string[]; merges: string[] } {
  const counts = new Map<string, number>();
  for (const w of preTokenizer(pre).split(corpus)) {
    const bl = bytesToByteLevel(Buffer.from(w, "utf8"));
    counts.set(bl, (counts.get(bl) ?? 0) + 1);
  }
  // GPT-2 orders the base alphabet by its byte-level characters (printable bytes first).
  const tokens = [...BYTE_CHARS].sort((a, b) => (a.codePointAt(0) as number) - (b.codePointAt(0) as number));
  const known = new Set(tokens);
  const merges: string[] = [];
  for (const [left, right] of learnMerges(counts, nMerges)) {
    merges.push(`${left} ${right}`);
    if (!known.has(left + right)) {
      known.add(left + right);
      tokens.push(left + right);
    }
  }
  return { tokens, merges };
}

let cached: GgufTokenizerSpec | undefined;

/**
 * The made-here BPE + ChatML tokenizer: byte-level BPE learned on the built-in corpus, pre-tokenizer
 * "qwen2", `<|endoftext|>` as BOS and padding (not added), `<|im_end|>` as EOS and EOT, and the
 * Qwen2.5-like ChatML template with tools.
 */
export function bpeChatmlSpec(): GgufTokenizerSpec {
  cached ??= byteLevelBpeSpec("qwen2");
  return structuredClone(cached);
}

/** The same vocabulary recipe learned with another llama.cpp pre-tokenizer ("gpt-2", "llama-bpe", …). */
export function byteLevelBpeSpec(pre: string): GgufTokenizerSpec {
  const { tokens, merges } = trainByteLevelBpe(madeCorpus(), BPE_MERGES, pre);
  const types: number[] = tokens.map(() => TokenType.normal);
  for (const [text, type] of BPE_SPECIALS) {
    tokens.push(text);
    types.push(type);
  }
  const id = (text: string): number => tokens.indexOf(text);
  return {
    model: "gpt2",
    pre,
    tokens,
    types,
    merges,
    bosId: id("<|endoftext|>"),
    eosId: id("<|im_end|>"),
    eotId: id("<|im_end|>"),
    padId: id("<|endoftext|>"),
    addBos: false,
    addEos: false,
    chatTemplate: CHATML_TOOLS_TEMPLATE,
  };
}
