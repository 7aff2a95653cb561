// A GPT-2-style byte-level BPE tokenizer over a GGUF "gpt2" vocabulary, giving llama.cpp's ids:
// special-token text cut out first (llama-vocab-rules.ts), words split by the named pre-tokenizer
// (pre-tokenize.ts), each word's UTF-8 bytes mapped to byte-level characters and merged by rank
// (lowest first, leftmost on ties, as llm_tokenizer_bpe_session), decoded back through the byte map.

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { TokenType } from "../vocab.js";
import { BigramQueue, SymbolLinks } from "./bigram-queue.js";
import { byteLevelToBytes, bytesToByteLevel } from "./byte-level.js";
import { splitSpecial, wellFormed } from "./llama-vocab-rules.js";
import { preTokenizer, type PreTokenizer } from "./pre-tokenize.js";
import { VocabTokenizer } from "./vocab-tokenizer.js";

/** Words whose tokens are remembered; a bound, so a long-running engine's cache cannot grow forever. */
const WORD_CACHE_LIMIT = 20_000;
/**
 * Characters of special-free fragments whose tokens are remembered (all together), and the shortest
 * fragment worth it. Why: a chat render is mostly text seen before (the system prompt, earlier turns,
 * cut at the template's special tokens), and pre-tokenizing it again costs more than the merges.
 */
const FRAGMENT_CACHE_CHARS = 4_000_000;
const FRAGMENT_CACHE_MIN_CHARS = 64;

/** Byte-level BPE tokenizer (GGUF `tokenizer.ggml.model` "gpt2"). */
export class BpeTokenizer extends VocabTokenizer {
  private readonly pre: PreTokenizer;
  private readonly ranks = new Map<string, Map<string, number>>();
  private readonly wordCache = new Map<string, number[]>();
  private readonly fragmentCache = new Map<string, readonly number[]>();
  private fragmentCacheChars = 0;

  constructor(spec: GgufTokenizerSpec) {
    if (spec.model !== "gpt2") throw new RangeError(`BpeTokenizer: tokenizer.model is '${spec.model}', expected 'gpt2'`);
    if (spec.pre === undefined) throw new RangeError("BpeTokenizer: tokenizer.pre is missing");
    const pre = preTokenizer(spec.pre);
    // llama.cpp's defaults for a gpt2 vocabulary without the keys: BOS = EOS = 11, no UNK.
    const dflt = (id: number | undefined): number | undefined => id ?? (11 < spec.tokens.length ? 11 : undefined);
    super(spec, {
      bosId: pre.noDefaultBos ? spec.bosId : dflt(spec.bosId),
      eosId: dflt(spec.eosId),
      addBos: spec.addBos ?? pre.addBosDefault,
      addSpacePrefix: spec.addSpacePrefix ?? false,
      cleanSpaces: pre.cleanSpaces,
      // BYTE, UNUSED and undefined types render as nothing in a BPE vocabulary.
      piece: (type, text) => (type === TokenType.normal ? byteLevelToBytes(text) : []),
    });
    this.pre = pre;
    (spec.merges ?? []).forEach((m, rank) => {
      const at = m.indexOf(" ", 1);
      const left = m.slice(0, at);
      const right = m.slice(at + 1);
      let byLeft = this.ranks.get(left);
      if (byLeft === undefined) this.ranks.set(left, (byLeft = new Map()));
      // llama.cpp keeps the first rank of a repeated merge (unordered_map::emplace).
      if (!byLeft.has(right)) byLeft.set(right, rank);
    });
  }

  encode(text: string, opts: { special?: boolean } = {}): number[] {
    // Grown by push, not sized up front: `new Array(n)` is a holey array, which JSON.stringify (the prompt sent
    // upstream) serializes at half the speed.
    const out: number[] = [];
    for (const frag of splitSpecial(wellFormed(text), this.rules.specials, opts.special ?? false)) {
      if ("id" in frag) out.push(frag.id);
      else {
        const ids = this.encodeFragment(frag.text);
        for (let j = 0; j < ids.length; j++) out.push(ids[j] as number);
      }
    }
    return out;
  }

  /** Ids of a text without special tokens: the same whatever surrounds it (pre-tokenizing starts afresh at each fragment). */
  private encodeFragment(text: string): readonly number[] {
    const long = text.length >= FRAGMENT_CACHE_MIN_CHARS && text.length <= FRAGMENT_CACHE_CHARS / 16;
    const cached = long ? this.fragmentCache.get(text) : undefined;
    if (cached !== undefined) {
      // Most recently used last: the oldest is dropped first.
      this.fragmentCache.delete(text);
      this.fragmentCache.set(text, cached);
      return cached;
    }
    const ids: number[] = [];
    for (const word of this.pre.split(text)) for (const id of this.encodeWord(word)) ids.push(id);
    if (!long) return ids;
    while (this.fragmentCacheChars + text.length > FRAGMENT_CACHE_CHARS) {
      const oldest = this.fragmentCache.keys().next().value as string;
      this.fragmentCache.delete(oldest);
      this.fragmentCacheChars -= oldest.length;
    }
    this.fragmentCache.set(text, ids);
    this.fragmentCacheChars += text.length;
    return ids;
  }

  private encodeWord(word: string): number[] {
    const cached = this.wordCache.get(word);
    if (cached !== undefined) return cached;
    const ids = this.mergeWord(bytesToByteLevel(Buffer.from(word, "utf8")));
    if (this.wordCache.size >= WORD_CACHE_LIMIT) this.wordCache.delete(this.wordCache.keys().next().value as string);
    this.wordCache.set(word, ids);
    return ids;
  }

  private mergeWord(word: string): number[] {
    const whole = this.tokenToId.get(word);
    if (this.pre.ignoreMerges && whole !== undefined) return [whole];
    // llm_tokenizer_bpe_session: symbols linked in a list; the queue pops the lowest-ranked pair,
    // leftmost on ties; a pair whose sides changed since it was queued is skipped.
    const sym = Array.from(word);
    const n = sym.length;
    const links = new SymbolLinks(n);
    const queue = new BigramQueue<{ left: number; right: number; rank: number; text: string }>((a, b) => a.rank < b.rank || (a.rank === b.rank && a.left < b.left));
    const tryAdd = (left: number, right: number): void => {
      if (left < 0 || right < 0) return;
      const rank = this.ranks.get(sym[left] as string)?.get(sym[right] as string);
      if (rank !== undefined) queue.push({ left, right, rank, text: (sym[left] as string) + (sym[right] as string) });
    };
    for (let i = 1; i < n; i++) tryAdd(i - 1, i);
    while (queue.size > 0) {
      const b = queue.pop();
      const l = sym[b.left] as string;
      const r = sym[b.right] as string;
      if (l === "" || r === "" || l + r !== b.text) continue;
      sym[b.left] = b.text;
      sym[b.right] = "";
      const after = links.join(b.left, b.right);
      tryAdd(links.prev[b.left] as number, b.left);
      tryAdd(b.left, after);
    }
    const symbols = sym.filter((s) => s !== "");
    const ids: number[] = [];
    for (const s of symbols) {
      const id = this.tokenToId.get(s);
      if (id !== undefined) {
        ids.push(id);
        continue;
      }
      // As llama.cpp: a symbol that is not a token falls back to its single-byte tokens, where any.
      for (const b of Buffer.from(s, "utf8")) {
        const single = b < 0x80 ? this.tokenToId.get(String.fromCharCode(b)) : undefined;
        if (single !== undefined) ids.push(single);
      }
    }
    return ids;
  }
}
