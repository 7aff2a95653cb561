// BPE pre-tokenizers by llama.cpp name (`tokenizer.ggml.pre`): the regex split of text into words
// before merges. llama.cpp runs these regexes through hand-written matchers
// (`unicode_regex_split_custom_gpt2/_llama3/_qwen2` in src/unicode.cpp); these are ports of those
// matchers, so edge cases (whitespace runs, contractions, digits) split exactly as the engine does.
// Character classes: \p{L}, \p{N} and \s from llama.cpp's own Unicode tables (unicode-classes.ts).

import { unicodeClass } from "./unicode-classes.js";

/** How a named pre-tokenizer splits text, and the vocabulary flags llama.cpp ties to the name. */
export interface PreTokenizer {
  /** The family ("gpt2", "llama3", "qwen2") whose split it uses. */
  readonly family: "gpt2" | "llama3" | "qwen2";
  /** Words of `text` (code-point strings, before byte-level mapping). */
  split(text: string): string[];
  /** llama.cpp `ignore_merges`: a word that is itself a token is not merged. */
  readonly ignoreMerges: boolean;
  /** llama.cpp `clean_spaces` (clean_up_tokenization_spaces) when detokenizing. */
  readonly cleanSpaces: boolean;
  /** `add_bos` default when the GGUF has no `tokenizer.ggml.add_bos_token`. */
  readonly addBosDefault: boolean;
  /** llama.cpp drops the gpt2 default BOS (id 11) for this name (GLM-4). */
  readonly noDefaultBos?: boolean;
}

// Names as llama.cpp's llama_vocab::impl::load maps them (the subset whose split is one of the three).
const NAMES: Record<string, Omit<PreTokenizer, "split">> = {
  ...Object.fromEntries(
    ["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"].map((n) => [
      n,
      { family: "llama3", ignoreMerges: true, cleanSpaces: true, addBosDefault: true },
    ]),
  ),
  ...Object.fromEntries(
    ["gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "exaone4", "jina-v1-en", "jina-v2-code", "roberta-bpe"].map((n) => [
      n,
      { family: "gpt2", ignoreMerges: false, cleanSpaces: true, addBosDefault: false },
    ]),
  ),
  ...Object.fromEntries(
    ["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"].map((n) => [n, { family: "qwen2", ignoreMerges: false, cleanSpaces: false, addBosDefault: false }]),
  ),
  // The llama3 split without llama3's flags.
  dbrx: { family: "llama3", ignoreMerges: false, cleanSpaces: true, addBosDefault: false },
  "smaug-bpe": { family: "llama3", ignoreMerges: false, cleanSpaces: true, addBosDefault: false },
  glm4: { family: "llama3", ignoreMerges: false, cleanSpaces: true, addBosDefault: false, noDefaultBos: true },
  "chatglm-bpe": { family: "llama3", ignoreMerges: false, cleanSpaces: true, addBosDefault: false, noDefaultBos: true },
  stablelm2: { family: "qwen2", ignoreMerges: false, cleanSpaces: true, addBosDefault: false },
  megrez: { family: "qwen2", ignoreMerges: false, cleanSpaces: true, addBosDefault: false },
};

/** The pre-tokenizer for a llama.cpp name; throws naming the supported ones. */
export function preTokenizer(name: string): PreTokenizer {
  const flags = NAMES[name];
  if (flags === undefined) {
    throw new RangeError(`tokenizer.pre '${name}' is not supported by Arbor's BPE tokenizer (supported: ${Object.keys(NAMES).sort().join(", ")})`);
  }
  const split = flags.family === "gpt2" ? splitGpt2 : (text: string) => splitLlama3Like(text, flags.family === "llama3" ? 3 : 1);
  return { ...flags, split };
}

const WHITESPACE = new Set([0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000]);

interface Flags {
  letter: boolean;
  number: boolean;
  ws: boolean;
  /** llama.cpp's `flags.as_uint() != 0`: true for every code point, false past the end. */
  any: boolean;
}
const NONE: Flags = { letter: false, number: false, ws: false, any: false };
const flagCache = new Map<number, Flags>();

function flagsOf(cp: number | undefined): Flags {
  if (cp === undefined) return NONE;
  let f = flagCache.get(cp);
  if (f === undefined) {
    const cls = unicodeClass(cp);
    f = { letter: cls === 1, number: cls === 2, ws: WHITESPACE.has(cp), any: true };
    if (flagCache.size < 65536) flagCache.set(cp, f);
  }
  return f;
}

function codePoints(text: string): number[] {
  return Array.from(text, (c) => c.codePointAt(0) as number);
}

function lower(cp: number | undefined): number | undefined {
  if (cp === undefined) return undefined;
  if (cp >= 0x41 && cp <= 0x5a) return cp + 32;
  if (cp < 128) return cp;
  const l = String.fromCodePoint(cp).toLowerCase();
  return Array.from(l).length === 1 ? (l.codePointAt(0) as number) : cp;
}

const CR = 0x0d;
const LF = 0x0a;
const SPACE = 0x20;
const APOS = 0x27;
const ch = (s: string): number => s.charCodeAt(0);

/** Collects words as end positions over code points. */
function wordsOf(cps: number[], ends: number[]): string[] {
  const out: string[] = [];
  let start = 0;
  for (const end of ends) {
    out.push(cps.slice(start, end).map((c) => String.fromCodePoint(c)).join(""));
    start = end;
  }
  return out;
}

/**
 * What llama.cpp's hand-written splitters share: the text's code points, the word ends found so
 * far, `add(end)` (a word ends at `end`; returns its length, 0 for an empty one, which is not
 * recorded) and the code point / Unicode flags at a position (past the end: undefined / none).
 */
function splitCursor(text: string) {
  const cps = codePoints(text);
  const n = cps.length;
  const ends: number[] = [];
  let prevEnd = 0;
  const add = (end: number): number => {
    const len = end - prevEnd;
    if (len > 0) ends.push(end);
    prevEnd = end;
    return len;
  };
  const cpAt = (p: number): number | undefined => (p < n ? cps[p] : undefined);
  const fl = (p: number): Flags => flagsOf(cpAt(p));
  return { cps, n, ends, add, cpAt, fl };
}

/** `unicode_regex_split_custom_llama3` (maxDigits 3) and `_qwen2` (maxDigits 1). */
function splitLlama3Like(text: string, maxDigits: number): string[] {
  const { cps, n, ends, add, cpAt, fl } = splitCursor(text);
  let pos = 0;
  while (pos < n) {
    const cpt = cps[pos] as number;
    const flags = fl(pos);
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (cpt === APOS && pos + 1 < n) {
      const next = lower(cpAt(pos + 1));
      if (next === ch("s") || next === ch("t") || next === ch("m") || next === ch("d")) {
        pos += add(pos + 2);
        continue;
      }
      if (pos + 2 < n) {
        const next2 = lower(cpAt(pos + 2));
        if ((next === ch("r") && next2 === ch("e")) || (next === ch("v") && next2 === ch("e")) || (next === ch("l") && next2 === ch("l"))) {
          pos += add(pos + 3);
          continue;
        }
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(cpt === CR || cpt === LF || flags.number)) {
      if (flags.letter || fl(pos + 1).letter) {
        pos++;
        while (fl(pos).letter) pos++;
        add(pos);
        continue;
      }
    }
    // \p{N}{1,maxDigits}
    if (flags.number) {
      let ini = pos;
      while (fl(pos).number) {
        if (++pos - ini >= maxDigits) {
          add(pos);
          ini = pos;
        }
      }
      add(pos);
      continue;
    }
    // <space>?[^\s\p{L}\p{N}]+[\r\n]*
    let flags2 = cpt === SPACE ? fl(pos + 1) : flags;
    if (!(flags2.ws || flags2.letter || flags2.number) && flags.any) {
      pos += cpt === SPACE ? 1 : 0;
      while (!(flags2.ws || flags2.letter || flags2.number) && flags2.any) flags2 = fl(++pos);
      let cpt2 = cpAt(pos);
      while (cpt2 === CR || cpt2 === LF) cpt2 = cpAt(++pos);
      add(pos);
      continue;
    }
    let nWs = 0;
    let lastEndRn = 0;
    while (fl(pos + nWs).ws) {
      const c2 = cpAt(pos + nWs);
      if (c2 === CR || c2 === LF) lastEndRn = pos + nWs + 1;
      nWs++;
    }
    // \s*[\r\n]+
    if (lastEndRn > 0) {
      pos = lastEndRn;
      add(pos);
      continue;
    }
    // \s+(?!\S)
    if (nWs > 1 && cpAt(pos + nWs) !== undefined) {
      pos += nWs - 1;
      add(pos);
      continue;
    }
    // \s+
    if (nWs > 0) {
      pos += nWs;
      add(pos);
      continue;
    }
    add(++pos);
  }
  return wordsOf(cps, ends);
}

/** `unicode_regex_split_custom_gpt2`: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
function splitGpt2(text: string): string[] {
  const { cps, n, ends, add, cpAt, fl } = splitCursor(text);
  let pos = 0;
  while (pos < n) {
    const cpt = cps[pos] as number;
    const flags = fl(pos);
    if (cpt === APOS && pos + 1 < n) {
      const next = cpAt(pos + 1);
      if (next === ch("s") || next === ch("t") || next === ch("m") || next === ch("d")) {
        pos += add(pos + 2);
        continue;
      }
      if (pos + 2 < n) {
        const next2 = cpAt(pos + 2);
        if ((next === ch("r") && next2 === ch("e")) || (next === ch("v") && next2 === ch("e")) || (next === ch("l") && next2 === ch("l"))) {
          pos += add(pos + 3);
          continue;
        }
      }
    }
    let flags2 = cpt === SPACE ? fl(pos + 1) : flags;
    if (flags2.letter) {
      pos += cpt === SPACE ? 1 : 0;
      while (flags2.letter) flags2 = fl(++pos);
      add(pos);
      continue;
    }
    if (flags2.number) {
      pos += cpt === SPACE ? 1 : 0;
      while (flags2.number) flags2 = fl(++pos);
      add(pos);
      continue;
    }
    if (!(flags2.ws || flags2.letter || flags2.number) && flags2.any) {
      pos += cpt === SPACE ? 1 : 0;
      while (!(flags2.ws || flags2.letter || flags2.number) && flags2.any) flags2 = fl(++pos);
      add(pos);
      continue;
    }
    let nWs = 0;
    while (fl(pos + nWs).ws) nWs++;
    if (nWs > 1 && cpAt(pos + nWs) !== undefined) {
      pos += nWs - 1;
      add(pos);
      continue;
    }
    if (nWs > 0) {
      pos += nWs;
      add(pos);
      continue;
    }
    add(++pos);
  }
  return wordsOf(cps, ends);
}
