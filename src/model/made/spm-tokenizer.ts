// A SentencePiece-style tokenizer over a GGUF "llama" vocabulary, giving llama.cpp's ids: special-token
// text cut out first, spaces escaped to "▁" (with a leading one after BOS/specials when
// add_space_prefix), then llama.cpp's bigram merge (llm_tokenizer_spm_session): repeatedly join the
// adjacent pair whose concatenation is a token of the highest score (leftmost on ties); characters
// that never become a token fall back to their `<0xXX>` byte tokens.

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { checkTokenId, type ModelTokenizer } from "../tokenizer.js";
import { SPACE_PIECE, TokenType } from "../vocab.js";
import { BigramQueue } from "./bigram-queue.js";
import { joinPieces, splitSpecial, utf8Text, vocabRules, wellFormed, type VocabRules } from "./llama-vocab-rules.js";

const EMPTY = new Uint8Array(0);

interface Bigram {
  left: number;
  right: number;
  score: number;
  size: number;
}

/** SentencePiece-style tokenizer (GGUF `tokenizer.ggml.model` "llama"). */
export class SpmTokenizer implements ModelTokenizer {
  readonly size: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly stopIds: readonly number[];
  readonly addBos: boolean;
  /** Characters of the longest token's text (the engine bounds a prompt's token count with it). */
  readonly maxTokenChars: number;
  private readonly tokens: readonly string[];
  private readonly scores: readonly number[];
  private readonly rules: VocabRules;
  private readonly tokenToId = new Map<string, number>();
  private readonly byteIds: number[] = [];
  private readonly addSpacePrefix: boolean;
  private readonly pieces: (Uint8Array | undefined)[] = [];

  constructor(spec: GgufTokenizerSpec) {
    if (spec.model !== "llama") throw new RangeError(`SpmTokenizer: tokenizer.model is '${spec.model}', expected 'llama'`);
    this.tokens = spec.tokens;
    this.size = spec.tokens.length;
    // llama.cpp scores are f32; a merge decision between two close doubles must round as it does.
    this.scores = (spec.scores ?? spec.tokens.map(() => 0)).map((s) => Math.fround(s));
    // llama.cpp's SPM defaults: BOS 1, EOS 2 (where the vocabulary is that large), add_bos, space prefix.
    this.bosId = spec.bosId ?? (1 < this.size ? 1 : undefined);
    this.eosId = spec.eosId ?? (2 < this.size ? 2 : undefined);
    this.addBos = spec.addBos ?? true;
    this.addSpacePrefix = spec.addSpacePrefix ?? true;
    this.rules = vocabRules(spec, this.eosId);
    this.stopIds = this.rules.eogIds;
    this.maxTokenChars = spec.tokens.reduce((m, _, id) => Math.max(m, this.tokenText(id).length), 1);
    spec.tokens.forEach((t, i) => this.tokenToId.set(t, i));
    for (let b = 0; b < 256; b++) {
      const id = this.tokenToId.get(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`) ?? (b < 0x80 ? this.tokenToId.get(String.fromCharCode(b)) : undefined);
      this.byteIds.push(id ?? -1);
    }
  }

  encode(text: string, opts: { special?: boolean } = {}): number[] {
    const out: number[] = [];
    let prevSpecial = true; // llama.cpp: the first fragment counts as following a special token
    for (const frag of splitSpecial(wellFormed(text), this.rules.specials, opts.special ?? false)) {
      if ("id" in frag) {
        out.push(frag.id);
        prevSpecial = true;
        continue;
      }
      const raw = (this.addSpacePrefix && prevSpecial ? " " : "") + frag.text;
      this.tokenizeEscaped(raw.replaceAll(" ", SPACE_PIECE), out);
      prevSpecial = false;
    }
    return out;
  }

  decode(ids: readonly number[], opts: { special?: boolean } = {}): string {
    const special = opts.special ?? false;
    return utf8Text(joinPieces(ids.map((id) => this.piece(id, special)), this.addSpacePrefix, false));
  }

  tokenText(id: number): string {
    return utf8Text(this.piece(id, true));
  }

  tokenBytes(id: number): number[] {
    return Array.from(this.piece(id, true));
  }

  isSpecial(id: number): boolean {
    checkTokenId(this, id);
    const t = this.rules.types[id];
    return t === TokenType.control || t === TokenType.unknown;
  }

  /**
   * Bytes of one token as llama.cpp's token_to_piece gives them: CONTROL and UNKNOWN tokens only
   * with `special`. Cached per id, as llama.cpp caches its pieces.
   */
  private piece(id: number, special: boolean): Uint8Array {
    checkTokenId(this, id);
    const type = this.rules.types[id];
    if (!special && (type === TokenType.control || type === TokenType.unknown)) return EMPTY;
    let bytes = this.pieces[id];
    if (bytes === undefined) this.pieces[id] = bytes = Uint8Array.from(this.specialPiece(id));
    return bytes;
  }

  private specialPiece(id: number): number[] {
    const type = this.rules.types[id];
    const text = this.tokens[id] as string;
    if (type === TokenType.control || type === TokenType.unknown) return [...Buffer.from(text, "utf8")];
    if (type === TokenType.userDefined) return [...Buffer.from(text, "utf8")];
    if (type === TokenType.normal) return [...Buffer.from(text.replaceAll(SPACE_PIECE, " "), "utf8")];
    if (type === TokenType.byte) return [Number.parseInt(text.slice(3), 16) & 0xff];
    return [];
  }

  private tokenizeEscaped(text: string, out: number[]): void {
    // Symbols are the text's characters, linked so merges can unlink the right one.
    const sym = Array.from(text);
    const n = sym.length;
    if (n === 0) return;
    const sizes = sym.map((s) => Buffer.byteLength(s, "utf8"));
    const prev = sym.map((_, i) => i - 1);
    const next = sym.map((_, i) => (i + 1 < n ? i + 1 : -1));
    // Highest score first, then the leftmost: llm_bigram_spm's order.
    const queue = new BigramQueue<Bigram>((a, b) => a.score > b.score || (a.score === b.score && a.left < b.left));
    const tryAdd = (left: number, right: number): void => {
      if (left < 0 || right < 0) return;
      const id = this.tokenToId.get((sym[left] as string) + (sym[right] as string));
      if (id === undefined) return;
      queue.push({ left, right, score: this.scores[id] as number, size: (sizes[left] as number) + (sizes[right] as number) });
    };
    for (let i = 1; i < n; i++) tryAdd(i - 1, i);
    while (queue.size > 0) {
      const b = queue.pop();
      const ls = sizes[b.left] as number;
      const rs = sizes[b.right] as number;
      // Stale: one side was merged since this bigram was queued.
      if (ls === 0 || rs === 0 || ls + rs !== b.size) continue;
      sym[b.left] = (sym[b.left] as string) + (sym[b.right] as string);
      sizes[b.left] = ls + rs;
      sizes[b.right] = 0;
      sym[b.right] = "";
      const after = next[b.right] as number;
      next[b.left] = after;
      if (after >= 0) prev[after] = b.left;
      tryAdd(prev[b.left] as number, b.left);
      tryAdd(b.left, after);
    }
    for (let i = 0; i !== -1; i = next[i] as number) {
      const s = sym[i] as string;
      const id = this.tokenToId.get(s);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      for (const byte of Buffer.from(s, "utf8")) {
        const bid = this.byteIds[byte] as number;
        if (bid < 0) throw new RangeError(`SpmTokenizer: no byte-fallback token <0x${byte.toString(16).toUpperCase().padStart(2, "0")}> in the vocabulary`);
        out.push(bid);
      }
    }
  }
}
