// What every part of Arbor needs from a model's tokenizer, whatever the model: Arbor's own SPM
// vocabulary (vocab.ts), llama.cpp's tokenizer of a loaded GGUF (engine/llama-tokenizer.ts), or the
// made-here BPE and SentencePiece vocabularies. Ids are always the model's own: nothing here maps
// one vocabulary onto another.

/** A model's tokenizer: text ⇄ ids, its special tokens and the ids that end a turn. */
export interface ModelTokenizer {
  /** Number of token ids (the embedding table's rows). */
  readonly size: number;
  /** Beginning-of-sequence id, when the model has one. */
  readonly bosId: number | undefined;
  /** End-of-sequence id, when the model has one. */
  readonly eosId: number | undefined;
  /**
   * Ids that end an assistant turn by default: EOS, EOT and the model's other end-of-generation
   * tokens (e.g. ChatML's `<|im_end|>`, Llama 3's `<|eot_id|>` and `<|eom_id|>`).
   */
  readonly stopIds: readonly number[];
  /** Whether a plain-text prompt starts with BOS (GGUF `tokenizer.ggml.add_bos_token`). */
  readonly addBos: boolean;
  /**
   * Token ids of `text`, no BOS added. With `special`, the text of special tokens (`<|im_end|>`)
   * becomes their ids, as llama.cpp's `parse_special`; without, it is plain text.
   */
  encode(text: string, opts?: { special?: boolean }): number[];
  /**
   * Text of `ids`. Special tokens render as their text only with `special` (default false: BOS, EOS
   * and control tokens render as nothing). Invalid UTF-8 becomes U+FFFD.
   */
  decode(ids: readonly number[], opts?: { special?: boolean }): string;
  /** Display text of one token (logprob listings): its piece with byte-level/SPM escapes undone. */
  tokenText(id: number): string;
  /** UTF-8 bytes of one token as OpenAI's `bytes` field gives them. */
  tokenBytes(id: number): number[];
  /** Whether `id` is a special (control) token. */
  isSpecial(id: number): boolean;
}

/** Throws a RangeError naming the id when it is not a token of `tok`. */
export function checkTokenId(tok: Pick<ModelTokenizer, "size">, id: number, where = "token id"): void {
  if (!Number.isInteger(id) || id < 0 || id >= tok.size) throw new RangeError(`${where} ${id} is outside the vocabulary (size ${tok.size})`);
}
