// The parts of llama.cpp's vocabulary loading that every tokenizer model shares (src/llama-vocab.cpp,
// `llama_vocab::impl::load` and `tokenizer_st_partition`): which tokens end generation, which
// token types llama.cpp overrides by their text, and how special-token text is cut out of raw text
// before the model's own tokenizer runs. Mirrored so the JS tokenizers give llama.cpp's ids.

import { TokenType } from "../vocab.js";
import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";

/** Token texts llama.cpp treats as end-of-generation whatever the metadata says. */
const EOG_TEXTS = new Set([
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<|return|>",
  "<|call|>",
  "<|flush|>",
  "<|calls|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "</s>",
  "<|eom_id|>",
  "<EOT>",
  "_<EOT>",
  "[EOT]",
  "[EOS]",
  "<|end_of_text|>",
  "<end_of_utterance>",
  "<eos>",
  "<turn|>",
  "<|tool_response>",
  "<\uff5cend\u2581of\u2581sentence\uff5c>",
  "[e~[",
]);

/** Fill-in-the-middle token texts llama.cpp detects (and types CONTROL) when no id is given. */
const FIM_TEXTS = {
  pre: ["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uff5cfim\u2581begin\uff5c>", "<PRE>", "\u2581<PRE>", "<|code_prefix|>", "<|prefix|>"],
  suf: ["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uff5cfim\u2581hole\uff5c>", "<SUF>", "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>"],
  mid: ["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uff5cfim\u2581end\uff5c>", "<MID>", "\u2581<MID>", "<|code_middle|>", "<|middle|>"],
  // These three also end generation.
  pad: ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
  rep: ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"],
  sep: ["<|file_sep|>"],
} as const;

/** gpt-oss's channel markers, which llama.cpp always renders (typed USER_DEFINED). */
const ALWAYS_RENDERED = new Set(["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"]);

/** A vocabulary's token types after llama.cpp's text-based overrides, and its end-of-generation ids. */
export interface VocabRules {
  /** Effective llama_token_type per id (CONTROL where llama.cpp forces it). */
  types: number[];
  /** Sorted ids that end generation (llama.cpp's `special_eog_ids`). */
  eogIds: number[];
  /** Tokens cut out of raw text before tokenizing, longest text first: CONTROL, USER_DEFINED, UNKNOWN. */
  specials: { text: string; id: number; parseAlways: boolean }[];
}

/** Apply llama.cpp's load-time rules to a tokenizer spec; `eosDefault` is the model's default EOS id. */
export function vocabRules(spec: GgufTokenizerSpec, eosId: number | undefined): VocabRules {
  const types = [...spec.types];
  const eog = new Set<number>();
  const forceControl = (id: number): void => {
    if (types[id] !== TokenType.control) types[id] = TokenType.control;
  };
  spec.tokens.forEach((text, id) => {
    if (EOG_TEXTS.has(text)) {
      eog.add(id);
      forceControl(id);
    }
    if (FIM_TEXTS.pre.includes(text as never) || FIM_TEXTS.suf.includes(text as never) || FIM_TEXTS.mid.includes(text as never)) forceControl(id);
    if (FIM_TEXTS.pad.includes(text as never) || FIM_TEXTS.rep.includes(text as never) || FIM_TEXTS.sep.includes(text as never)) {
      eog.add(id);
      forceControl(id);
    }
  });
  spec.tokens.forEach((text, id) => {
    if (ALWAYS_RENDERED.has(text)) types[id] = TokenType.userDefined;
  });
  for (const id of [eosId, spec.eotId, spec.eomId]) {
    if (id !== undefined) eog.add(id);
  }
  const specials: VocabRules["specials"] = [];
  types.forEach((t, id) => {
    if (t === TokenType.control || t === TokenType.userDefined || t === TokenType.unknown) {
      specials.push({ text: spec.tokens[id] as string, id, parseAlways: t === TokenType.userDefined });
    }
  });
  // llama.cpp sorts by text length only (std::sort, unstable); ties keep id order here, which only
  // matters for two equal-length specials overlapping in one text, which no vocabulary here has.
  specials.sort((a, b) => b.text.length - a.text.length || a.id - b.id);
  return { types, eogIds: [...eog].sort((a, b) => a - b), specials };
}

/** A piece of text to tokenize, or a special token already cut out of it. */
export type Fragment = { text: string } | { id: number };

/**
 * Cut special-token text out of `text` as llama.cpp's `tokenizer_st_partition`: each special token in
 * turn (longest first) splits every remaining raw fragment at each of its occurrences. Without
 * `parseSpecial` only USER_DEFINED tokens are cut (as Hugging Face does for added, non-special tokens).
 */
export function splitSpecial(text: string, specials: VocabRules["specials"], parseSpecial: boolean): Fragment[] {
  let frags: Fragment[] = text.length > 0 ? [{ text }] : [];
  for (const s of specials) {
    if (!parseSpecial && !s.parseAlways) continue;
    // Most specials are in no prompt: the fragments stay as they are (no new list per special per prompt).
    if (!occursIn(frags, s.text)) continue;
    const next: Fragment[] = [];
    for (const f of frags) {
      if (!("text" in f)) {
        next.push(f);
        continue;
      }
      let pos = 0;
      for (;;) {
        const at = f.text.indexOf(s.text, pos);
        if (at < 0) break;
        if (at > pos) next.push({ text: f.text.slice(pos, at) });
        next.push({ id: s.id });
        pos = at + s.text.length;
      }
      if (pos < f.text.length) next.push({ text: f.text.slice(pos) });
    }
    frags = next;
  }
  return frags;
}

/** Whether `special` occurs in a raw fragment of `frags`. */
function occursIn(frags: readonly Fragment[], special: string): boolean {
  for (const f of frags) if ("text" in f && f.text.includes(special)) return true;
  return false;
}

const utf8Decoder = new TextDecoder("utf-8", { fatal: false });

/**
 * Text as llama.cpp receives it through N-API: lone surrogates become U+FFFD (what a round trip through UTF-8
 * gives, without its two copies of every prompt: nearly every text is well-formed and comes back as it is).
 */
export function wellFormed(text: string): string {
  return text.isWellFormed() ? text : text.toWellFormed();
}

/** UTF-8 bytes to text, invalid sequences as U+FFFD (as V8 builds llama.cpp's result string). */
export function utf8Text(bytes: Uint8Array | readonly number[]): string {
  return utf8Decoder.decode(bytes instanceof Uint8Array ? bytes : Uint8Array.from(bytes));
}

/**
 * llama.cpp's detokenize around the per-token pieces: with `addSpacePrefix` the first piece loses one
 * leading space; with `cleanSpaces` the clean_up_tokenization_spaces passes run on the bytes
 * (" ?" " !" " ." " ," lose the space, " ' " loses both, " 's" " 'm" " 're" " 've" lose it).
 */
export function joinPieces(pieces: readonly Uint8Array[], addSpacePrefix: boolean, cleanSpaces: boolean): Uint8Array {
  const parts = [...pieces];
  const first = parts[0];
  if (first !== undefined && addSpacePrefix && first[0] === 0x20) parts[0] = first.subarray(1);
  const joined = Buffer.concat(parts);
  if (!cleanSpaces) return joined;
  const text = Array.from(joined);
  // A literal port of the three in-place passes (they read bytes the pass itself may have rewritten).
  const t = text;
  const c = (s: string): number => s.charCodeAt(0);
  const SP = 0x20;
  const APOS = 0x27;
  // First pass: " ?", " !", " .", " ," lose the space.
  const total1 = t.length;
  let total = total1 ? 1 : 0;
  for (let i = 1; i < total1; i++) {
    const x = t[i] as number;
    if (t[i - 1] === SP && (x === c("?") || x === c("!") || x === c(".") || x === c(","))) total--;
    t[total++] = x;
  }
  // Second pass: " ' " loses both spaces.
  const total2 = total;
  total = total ? 1 : 0;
  for (let i = 1; i < total2; i++) {
    const x = t[i] as number;
    if (x === APOS && i + 1 < total2 && t[i - 1] === SP && t[i + 1] === SP) {
      total--;
      t[++i] = 0;
    }
    t[total++] = x;
  }
  // Third pass: " 's", " 'm", " 're", " 've" lose the space.
  const total3 = total;
  total = total ? 1 : 0;
  for (let i = 1; i < total3; i++) {
    const x = t[i] as number;
    if (t[i - 1] === SP && x === APOS && i + 1 < total3) {
      const x1 = t[i + 1];
      if (x1 === c("s") || x1 === c("m")) total--;
      else if (i + 2 < total3) {
        const x2 = t[i + 2];
        if ((x1 === c("r") && x2 === c("e")) || (x1 === c("v") && x2 === c("e"))) total--;
      }
    }
    t[total++] = x;
  }
  return Uint8Array.from(t.slice(0, total));
}
