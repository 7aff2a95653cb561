// A SentencePiece-style tokenizer over a GGUF "llama" vocabulary, giving llama.cpp's ids: special-token
// text cut out first, spaces escaped to "▁" (with a leading one after BOS/specials when
// add_space_prefix), then llama.cpp's bigram merge (llm_tokenizer_spm_session): repeatedly join the
// adjacent pair whose concatenation is a token of the highest score (leftmost on ties); characters
// that never become a token fall back to their `<0xXX>` byte tokens.

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { SPACE_PIECE, TokenType } from "../vocab.js";
import { BigramQueue, SymbolLinks } from "./bigram-queue.js";
import { splitSpecial, wellFormed } from "./llama-vocab-rules.js";
import { VocabTokenizer } from "./vocab-tokenizer.js";

interface Bigram {
  left: number;
  right: number;
  score: number;
  size: number;
}

/** SentencePiece-style tokenizer (GGUF `tokenizer.ggml.model` "llama"). */
export class SpmTokenizer extends VocabTokenizer {
  private readonly scores: readonly number[];
  private readonly byteIds: number[] = [];

  constructor(spec: GgufTokenizerSpec) {
    if (spec.model !== "llama") throw new RangeError(`SpmTokenizer: tokenizer.model is '${spec.model}', expected 'llama'`);
    const size = spec.tokens.length;
    // llama.cpp's SPM defaults: BOS 1, EOS 2 (where the vocabulary is that large), add_bos, space prefix.
    super(spec, {
      bosId: spec.bosId ?? (1 < size ? 1 : undefined),
      eosId: spec.eosId ?? (2 < size ? 2 : undefined),
      addBos: spec.addBos ?? true,
      addSpacePrefix: spec.addSpacePrefix ?? true,
      cleanSpaces: false,
      piece: (type, text) => {
        if (type === TokenType.normal) return [...Buffer.from(text.replaceAll(SPACE_PIECE, " "), "utf8")];
        if (type === TokenType.byte) return [Number.parseInt(text.slice(3), 16) & 0xff];
        return [];
      },
    });
    // llama.cpp scores are f32; a merge decision between two close doubles must round as it does.
    this.scores = (spec.scores ?? spec.tokens.map(() => 0)).map((s) => Math.fround(s));
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

  private tokenizeEscaped(text: string, out: number[]): void {
    // Symbols are the text's characters, linked so merges can unlink the right one.
    const sym = Array.from(text);
    const n = sym.length;
    if (n === 0) return;
    const sizes = sym.map((s) => Buffer.byteLength(s, "utf8"));
    const links = new SymbolLinks(n);
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
      const after = links.join(b.left, b.right);
      tryAdd(links.prev[b.left] as number, b.left);
      tryAdd(b.left, after);
    }
    for (let i = 0; i !== -1; i = links.next[i] as number) {
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
