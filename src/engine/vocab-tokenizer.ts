// Arbor's own vocabulary as a ModelTokenizer, for the engine's executors that serve the tiny
// policy (or no model at all: the cost model). Its behaviour is exactly the Vocab's: decoded text
// always shows the chat/tool markers, because the policy writes its tool-call markup with them and
// the tool plan reads that text. (Helper B makes Vocab itself implement ModelTokenizer; then this
// adapter reduces to the Vocab.)
import { stopTokenIds } from "../model/chat-template.js";
import { checkTokenId, type ModelTokenizer } from "../model/tokenizer.js";
import { CONTROL_TOKENS, TokenType, Vocab } from "../model/vocab.js";

/** Special-token texts that `encode(…, {special: true})` turns into their ids. */
const SPECIAL_TEXTS = ["<s>", "</s>", ...CONTROL_TOKENS];

/** `ModelTokenizer` over Arbor's {@link Vocab}; see the file header. */
export class VocabTokenizer implements ModelTokenizer {
  readonly size: number;
  readonly bosId: number;
  readonly eosId: number;
  readonly stopIds: readonly number[];
  readonly addBos = true;
  /** Every piece is one character (or one byte). */
  readonly maxTokenChars = 1;
  private readonly specialIds: Map<string, number>;

  constructor(readonly vocab: Vocab = new Vocab()) {
    this.size = vocab.size;
    this.bosId = vocab.bosId;
    this.eosId = vocab.eosId;
    this.stopIds = stopTokenIds(vocab);
    this.specialIds = new Map(SPECIAL_TEXTS.map((t) => [t, t === "<s>" ? vocab.bosId : t === "</s>" ? vocab.eosId : vocab.controlId(t)]));
  }

  encode(text: string, opts: { special?: boolean } = {}): number[] {
    if (opts.special !== true) return this.vocab.encode(text);
    // As llama.cpp's parse_special: special-token text anywhere becomes the token, the rest plain text.
    const out: number[] = [];
    let pos = 0;
    while (pos < text.length) {
      let at = -1;
      let hit = "";
      for (const s of SPECIAL_TEXTS) {
        const i = text.indexOf(s, pos);
        if (i >= 0 && (at < 0 || i < at || (i === at && s.length > hit.length))) {
          at = i;
          hit = s;
        }
      }
      if (at < 0) break;
      if (at > pos) out.push(...this.vocab.encode(text.slice(pos, at)));
      out.push(this.specialIds.get(hit) as number);
      pos = at + hit.length;
    }
    if (pos < text.length) out.push(...this.vocab.encode(text.slice(pos)));
    return out;
  }

  decode(ids: readonly number[]): string {
    return this.vocab.decode(ids);
  }

  tokenText(id: number): string {
    return this.vocab.tokenText(id);
  }

  tokenBytes(id: number): number[] {
    checkTokenId(this, id);
    if (this.vocab.types[id] === TokenType.byte) {
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(this.vocab.pieces[id] ?? "");
      if (m) return [parseInt(m[1] as string, 16)];
    }
    return [...Buffer.from(this.vocab.tokenText(id), "utf8")];
  }

  isSpecial(id: number): boolean {
    checkTokenId(this, id);
    return this.vocab.isControl(id);
  }
}
