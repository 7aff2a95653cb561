// What the made-here tokenizers over a GGUF vocabulary (byte-level BPE, SentencePiece) share: the
// vocabulary's ids and rules (BOS/EOS/EOG, token types, specials), and the way ids turn back into
// bytes as llama.cpp's token_to_piece does. Only a NORMAL/BYTE token's bytes differ by model (the
// byte-level map vs "▁" spaces and `<0xXX>` tokens), so each tokenizer passes that one function and
// writes its own `encode`.

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { checkTokenId, type ModelTokenizer } from "../tokenizer.js";
import { TokenType } from "../vocab.js";
import { joinPieces, utf8Text, vocabRules, type VocabRules } from "./llama-vocab-rules.js";

const EMPTY = new Uint8Array(0);

/** The model-specific parts of a vocabulary, as the tokenizer's own defaults resolve them. */
export interface VocabSetup {
  bosId: number | undefined;
  eosId: number | undefined;
  addBos: boolean;
  addSpacePrefix: boolean;
  /** llama.cpp's clean_spaces on decode (some BPE pre-tokenizers). */
  cleanSpaces: boolean;
  /** Bytes of a token that is neither CONTROL, UNKNOWN nor USER_DEFINED (NORMAL, BYTE, UNUSED…). */
  piece(type: number | undefined, text: string): number[];
}

/** A tokenizer over a GGUF vocabulary; subclasses tokenize, this decodes. */
export abstract class VocabTokenizer implements ModelTokenizer {
  readonly size: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly stopIds: readonly number[];
  readonly addBos: boolean;
  /** Characters of the longest token's text (the engine bounds a prompt's token count with it). */
  readonly maxTokenChars: number;
  protected readonly tokens: readonly string[];
  protected readonly rules: VocabRules;
  protected readonly tokenToId = new Map<string, number>();
  protected readonly addSpacePrefix: boolean;
  private readonly cleanSpaces: boolean;
  private readonly modelPiece: VocabSetup["piece"];
  private readonly pieces: (Uint8Array | undefined)[] = [];

  constructor(spec: GgufTokenizerSpec, setup: VocabSetup) {
    this.tokens = spec.tokens;
    this.size = spec.tokens.length;
    this.bosId = setup.bosId;
    this.eosId = setup.eosId;
    this.addBos = setup.addBos;
    this.addSpacePrefix = setup.addSpacePrefix;
    this.cleanSpaces = setup.cleanSpaces;
    this.modelPiece = setup.piece;
    this.rules = vocabRules(spec, this.eosId);
    this.stopIds = this.rules.eogIds;
    this.maxTokenChars = spec.tokens.reduce((m, _, id) => Math.max(m, this.tokenText(id).length), 1);
    spec.tokens.forEach((t, i) => this.tokenToId.set(t, i));
  }

  abstract encode(text: string, opts?: { special?: boolean }): number[];

  decode(ids: readonly number[], opts: { special?: boolean } = {}): string {
    const special = opts.special ?? false;
    return utf8Text(joinPieces(ids.map((id) => this.piece(id, special)), this.addSpacePrefix, this.cleanSpaces));
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
    const control = type === TokenType.control || type === TokenType.unknown;
    if (!special && control) return EMPTY;
    let bytes = this.pieces[id];
    if (bytes === undefined) {
      const text = this.tokens[id] as string;
      // CONTROL, UNKNOWN and USER_DEFINED tokens are their text; the rest as the model writes them.
      bytes = Uint8Array.from(control || type === TokenType.userDefined ? Buffer.from(text, "utf8") : this.modelPiece(type, text));
      this.pieces[id] = bytes;
    }
    return bytes;
  }
}
