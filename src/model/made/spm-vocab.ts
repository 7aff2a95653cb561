// The made-here SentencePiece-style vocabulary with Llama-3-style specials: `<unk>`, the 256 byte
// fallback tokens `<0x00>`..`<0xFF>`, pieces learned on the built-in corpus (spaces as "▁", a piece
// never crossing a word start, as SentencePiece's split_by_whitespace), the single characters, and
// `<|begin_of_text|>` … `<|python_tag|>` as CONTROL tokens. Scores rank the learned pieces (earlier
// merge, higher score), so llama.cpp's SPM bigram merge rebuilds them.

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { SPACE_PIECE, TokenType } from "../vocab.js";
import { learnMerges } from "./bpe-vocab.js";
import { madeCorpus } from "./corpus.js";
import { LLAMA3_TOOLS_TEMPLATE } from "./templates.js";

/** Llama-3-style specials, in id order after the pieces (all CONTROL, as in Llama 3.1's GGUFs). */
export const SPM_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"] as const;

/** Pieces learned by default. */
export const SPM_MERGES = 500;

/** Words of `text` as SentencePiece sees them: "▁" starts a word; newlines and tabs are byte fallback. */
function spmWords(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of text.split(/[\n\t\r]/)) {
    for (const w of line.replaceAll(" ", SPACE_PIECE).split(/(?=\u2581)/u)) {
      if (w.length > 0) counts.set(w, (counts.get(w) ?? 0) + 1);
    }
  }
  return counts;
}

/** SPM vocabulary learned on `corpus`: tokens, types and scores, without specials. */
export function trainSpm(corpus: string, nMerges: number): { tokens: string[]; types: number[]; scores: number[] } {
  const words = spmWords(corpus);
  const tokens: string[] = ["<unk>"];
  const types: number[] = [TokenType.unknown];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(TokenType.byte);
  }
  const scores: number[] = tokens.map(() => 0);
  const known = new Set(tokens);
  let rank = 0;
  const add = (piece: string): void => {
    if (known.has(piece)) return;
    known.add(piece);
    tokens.push(piece);
    types.push(TokenType.normal);
    scores.push(-rank++);
  };
  for (const [left, right] of learnMerges(words, nMerges)) add(left + right);
  // Every character of the corpus (printable ASCII always) is a piece; the rest use byte fallback.
  const chars = new Set<string>([SPACE_PIECE]);
  for (let c = 0x21; c <= 0x7e; c++) chars.add(String.fromCharCode(c));
  for (const w of words.keys()) for (const ch of w) chars.add(ch);
  for (const ch of [...chars].sort((a, b) => (a.codePointAt(0) as number) - (b.codePointAt(0) as number))) add(ch);
  return { tokens, types, scores };
}

let cached: GgufTokenizerSpec | undefined;

/**
 * The made-here SPM + Llama-3 tokenizer: BOS `<|begin_of_text|>` added, EOS and EOT `<|eot_id|>`, EOM
 * `<|eom_id|>`, no space prefix (Llama 3's text starts as written), and the Llama-3.1-like template.
 */
export function spmLlama3Spec(): GgufTokenizerSpec {
  if (cached !== undefined) return structuredClone(cached);
  const { tokens, types, scores } = trainSpm(madeCorpus(), SPM_MERGES);
  for (const s of SPM_SPECIALS) {
    tokens.push(s);
    types.push(TokenType.control);
    scores.push(0);
  }
  const id = (text: string): number => tokens.indexOf(text);
  cached = {
    model: "llama",
    tokens,
    types,
    scores,
    unkId: 0,
    bosId: id("<|begin_of_text|>"),
    eosId: id("<|eot_id|>"),
    eotId: id("<|eot_id|>"),
    eomId: id("<|eom_id|>"),
    addBos: true,
    addEos: false,
    addSpacePrefix: false,
    chatTemplate: LLAMA3_TOOLS_TEMPLATE,
  };
  return structuredClone(cached);
}
