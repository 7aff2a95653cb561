// Arbor's byte-level SentencePiece (SPM) vocabulary: special tokens, 256 byte-fallback tokens, the
// space piece "▁", the printable ASCII characters and the chat/tool control tokens. `encode` mirrors
// llama.cpp's SPM tokenizer for this vocabulary exactly (checked against llama.cpp in policy.test.ts).
// It is the tiny policy's `ModelTokenizer`.

import type { ModelTokenizer } from "./tokenizer.js";

/** Chat-role and tool-call markers, appended after the plain pieces as CONTROL tokens. */
export const CONTROL_TOKENS = [
  "<|system|>",
  "<|user|>",
  "<|assistant|>",
  "<|tool|>",
  "<|end|>",
  "<|tool_call|>",
  "<|/tool_call|>",
] as const;

export type ControlTokenName = (typeof CONTROL_TOKENS)[number];

/** GGUF `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type). */
export const TokenType = {
  normal: 1,
  unknown: 2,
  control: 3,
  userDefined: 4,
  unused: 5,
  byte: 6,
} as const;

/** The SPM word-boundary piece: llama.cpp escapes every space to it before tokenizing. */
export const SPACE_PIECE = "\u2581";

const FIRST_BYTE_ID = 3;
const SPACE_ID = FIRST_BYTE_ID + 256;
const FIRST_ASCII_ID = SPACE_ID + 1;
const ASCII_LO = 0x21;
const ASCII_HI = 0x7e;
const FIRST_CONTROL_ID = FIRST_ASCII_ID + (ASCII_HI - ASCII_LO + 1);

const utf8Decoder = new TextDecoder("utf-8", { fatal: false });

/**
 * The fixed vocabulary. Layout: 0 `<unk>`, 1 `<s>`, 2 `</s>`, 3..258 `<0x00>`..`<0xFF>`, 259 `▁`,
 * 260..353 the characters 0x21..0x7E, then CONTROL_TOKENS in order (354..360).
 */
export class Vocab implements ModelTokenizer {
  readonly unkId = 0;
  readonly bosId = 1;
  readonly eosId = 2;
  /** The policy's prompts start with `<s>` (GGUF `add_bos_token`). */
  readonly addBos = true;
  readonly pieces: string[];
  readonly types: number[];
  readonly scores: number[];
  private readonly controlIds = new Map<string, number>();

  constructor() {
    const pieces = ["<unk>", "<s>", "</s>"];
    const types: number[] = [TokenType.unknown, TokenType.control, TokenType.control];
    for (let b = 0; b < 256; b++) {
      pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
      types.push(TokenType.byte);
    }
    pieces.push(SPACE_PIECE);
    types.push(TokenType.normal);
    for (let c = ASCII_LO; c <= ASCII_HI; c++) {
      pieces.push(String.fromCharCode(c));
      types.push(TokenType.normal);
    }
    for (const name of CONTROL_TOKENS) {
      this.controlIds.set(name, pieces.length);
      pieces.push(name);
      types.push(TokenType.control);
    }
    this.pieces = pieces;
    this.types = types;
    // No piece is longer than one character, so SPM never merges and scores only need to exist.
    this.scores = pieces.map(() => 0);
  }

  /** Number of tokens. */
  get size(): number {
    return this.pieces.length;
  }

  /** Ids that end a turn: `</s>` and `<|end|>` (llama.cpp's end-of-generation set for this vocabulary). */
  get stopIds(): readonly number[] {
    return [this.eosId, this.controlId("<|end|>")];
  }

  /** True for `<unk>` and the CONTROL tokens (llama.cpp renders them only when asked for specials). */
  isSpecial(id: number): boolean {
    this.checkId(id);
    return this.types[id] === TokenType.control || this.types[id] === TokenType.unknown;
  }

  /** Id of a control token such as `<|user|>`; throws on an unknown name. */
  controlId(name: ControlTokenName | string): number {
    const id = this.controlIds.get(name);
    if (id === undefined) {
      throw new RangeError(`unknown control token '${name}' (known: ${CONTROL_TOKENS.join(" ")})`);
    }
    return id;
  }

  /** True for CONTROL-type tokens: `<s>`, `</s>` and the chat/tool markers. */
  isControl(id: number): boolean {
    return this.types[id] === TokenType.control;
  }

  /**
   * Plain-text tokenization, identical to llama.cpp's `tokenize(text, add_special=false,
   * parse_special=false)` for this vocabulary: a space becomes `▁`, printable ASCII its own piece,
   * every other UTF-8 byte a byte-fallback token. Control-token text is NOT recognised; no BOS.
   * Text round-trips through encode/decode except a literal "▁", which SPM reads as a space.
   */
  encode(text: string, opts: { special?: boolean } = {}): number[] {
    if (opts.special) return this.encodeSpecial(text);
    // Buffer encodes lone surrogates as U+FFFD, as N-API does when handing the string to llama.cpp.
    const bytes = Buffer.from(text, "utf8");
    const ids: number[] = [];
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i] as number;
      // Multi-byte UTF-8 sequences never contain ASCII bytes, so a per-byte decision equals SPM's
      // per-character one. The only multi-byte character in the vocabulary is "▁" (E2 96 81):
      // llama.cpp maps a literal "▁" to the space piece too, so it decodes back as a space.
      if (b === 0x20) ids.push(SPACE_ID);
      else if (b >= ASCII_LO && b <= ASCII_HI) ids.push(FIRST_ASCII_ID + (b - ASCII_LO));
      else if (b === 0xe2 && bytes[i + 1] === 0x96 && bytes[i + 2] === 0x81) {
        ids.push(SPACE_ID);
        i += 2;
      } else ids.push(FIRST_BYTE_ID + b);
    }
    return ids;
  }

  /**
   * Text of a token sequence: byte tokens are joined into UTF-8 (invalid sequences become U+FFFD),
   * control markers render as their text, `<s>`, `</s>` and `<unk>` render as nothing. With
   * `special`, every token renders as llama.cpp's `detokenize(ids, special=true)` does: `<s>`,
   * `</s>` and `<unk>` as their text too. Unlike other tokenizers the chat markers render without
   * `special`: Arbor's tool-call markup is read from the decoded text (tool-markup.ts).
   */
  decode(ids: readonly number[], opts: { special?: boolean } = {}): string {
    const bytes: number[] = [];
    for (const id of ids) {
      this.checkId(id);
      if (id >= FIRST_BYTE_ID && id < SPACE_ID) bytes.push(id - FIRST_BYTE_ID);
      else if (id === SPACE_ID) bytes.push(0x20);
      else if (id >= FIRST_ASCII_ID && id < FIRST_CONTROL_ID) bytes.push(ASCII_LO + (id - FIRST_ASCII_ID));
      else if (id >= FIRST_CONTROL_ID || opts.special) for (const b of Buffer.from(this.pieces[id] as string, "utf8")) bytes.push(b);
    }
    return utf8Decoder.decode(Uint8Array.from(bytes));
  }

  /** UTF-8 bytes of one token: its byte, character or space, or the text of a special token. */
  tokenBytes(id: number): number[] {
    this.checkId(id);
    if (id >= FIRST_BYTE_ID && id < SPACE_ID) return [id - FIRST_BYTE_ID];
    if (id === SPACE_ID) return [0x20];
    if (id >= FIRST_ASCII_ID && id < FIRST_CONTROL_ID) return [ASCII_LO + (id - FIRST_ASCII_ID)];
    return [...Buffer.from(this.pieces[id] as string, "utf8")];
  }

  /**
   * `encode` with special-token text parsed, as llama.cpp's `tokenize(text, parse_special=true)`:
   * every CONTROL or UNKNOWN token's text (longest first) becomes its id, the text between is
   * encoded as plain text.
   */
  private encodeSpecial(text: string): number[] {
    const specials = this.pieces
      .map((piece, id) => ({ piece, id }))
      .filter(({ id }) => this.types[id] === TokenType.control || this.types[id] === TokenType.unknown)
      .sort((a, b) => b.piece.length - a.piece.length || a.id - b.id);
    let frags: (string | number)[] = [Buffer.from(text, "utf8").toString("utf8")];
    for (const { piece, id } of specials) {
      frags = frags.flatMap((f) => {
        if (typeof f === "number") return [f];
        const parts = f.split(piece);
        return parts.flatMap((p, i) => (i === 0 ? [p] : [id, p])).filter((p) => p !== "");
      });
    }
    return frags.flatMap((f) => (typeof f === "number" ? [f] : this.encode(f)));
  }

  /**
   * Display text of one token (e.g. for logprob listings): `▁` as a space, printable and ASCII
   * byte tokens as their character, other byte tokens and special tokens as their piece.
   */
  tokenText(id: number): string {
    this.checkId(id);
    if (id >= FIRST_BYTE_ID && id < FIRST_BYTE_ID + 0x80) return String.fromCharCode(id - FIRST_BYTE_ID);
    if (id === SPACE_ID) return " ";
    return this.pieces[id] as string;
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.pieces.length) {
      throw new RangeError(`token id ${id} is outside the vocabulary (size ${this.pieces.length})`);
    }
  }
}
