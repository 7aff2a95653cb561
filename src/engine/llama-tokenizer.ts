// A loaded GGUF's own tokenizer, as llama.cpp runs it: the built-in engine serves any model with
// these ids (never a re-implementation's), its special tokens and its end-of-generation set.
// Pieces, token types and `add_bos_token` come from the GGUF metadata that node-llama-cpp read.
import type { LlamaModel, Token } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";
import { BYTE_CHARS } from "../model/made/byte-level.js";
import { checkTokenId, type ModelTokenizer } from "../model/tokenizer.js";
import { TokenType } from "../model/vocab.js";
import { loadLlamaModel } from "./llama-context.js";
import type { LlamaGpu } from "./llama-runtime.js";

let unicodeToByte: Map<string, number> | undefined;

/** `ModelTokenizer` over a node-llama-cpp model (loaded fully or `vocabOnly`). */
export class LlamaTokenizer implements ModelTokenizer {
  readonly size: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly stopIds: readonly number[];
  readonly addBos: boolean;
  /** GGUF `tokenizer.ggml.model` ("llama" = SPM, "gpt2" = byte-level BPE, …). */
  readonly kind: string;
  /** Characters of the longest token's text: a text of n characters has at least n / this tokens. */
  readonly maxTokenChars: number;
  private readonly pieces: readonly string[];
  private readonly types: readonly number[];

  constructor(private readonly model: LlamaModel) {
    const meta = model.fileInfo.metadata as { tokenizer?: { ggml?: Record<string, unknown> } };
    const ggml = meta.tokenizer?.ggml ?? {};
    const pieces = ggml.tokens;
    if (!Array.isArray(pieces) || pieces.length === 0) throw new ArborError(`model ${model.filename ?? "?"}: GGUF has no tokenizer.ggml.tokens`, "model");
    this.pieces = pieces as string[];
    this.size = pieces.length;
    this.types = Array.isArray(ggml.token_type) ? (ggml.token_type as number[]) : [];
    this.kind = typeof ggml.model === "string" ? ggml.model : "llama";
    this.bosId = model.tokens.bos ?? undefined;
    this.eosId = model.tokens.eos ?? undefined;
    const stops: number[] = [];
    for (const id of model.iterateAllTokens()) if (model.isEogToken(id)) stops.push(id);
    this.stopIds = stops;
    this.addBos = typeof ggml.add_bos_token === "boolean" ? ggml.add_bos_token : model.tokens.shouldPrependBosToken;
    let longest = 1;
    for (const p of this.pieces) if (p.length > longest) longest = p.length;
    this.maxTokenChars = longest;
  }

  /**
   * The tokenizer of the GGUF at `modelPath`, loaded vocabulary-only on the runtime of `gpu` (no
   * weights: cheap, and it stays usable while the engine sleeps). Call {@link dispose} when done.
   */
  static async load(modelPath: string, gpu: LlamaGpu = false): Promise<LlamaTokenizer> {
    // The engine's runtime (no second native binary loaded for a tokenizer); vocabulary-only loads no weights.
    const model = await loadLlamaModel(modelPath, gpu, true);
    try {
      return new LlamaTokenizer(model);
    } catch (err) {
      await model.dispose();
      throw err;
    }
  }

  /** The GGUF metadata node-llama-cpp read (nested object: `tokenizer.chat_template`, `<arch>.context_length`…). */
  get metadata(): Record<string, unknown> {
    return this.model.fileInfo.metadata as unknown as Record<string, unknown>;
  }

  encode(text: string, opts: { special?: boolean } = {}): number[] {
    return this.model.tokenize(text, opts.special === true);
  }

  decode(ids: readonly number[], opts: { special?: boolean } = {}): string {
    for (const id of ids) checkTokenId(this, id);
    return this.model.detokenize(ids as Token[], opts.special === true);
  }

  tokenText(id: number): string {
    checkTokenId(this, id);
    const type = this.types[id];
    // A lone byte of a multi-byte character has no text of its own: show its piece, as Arbor's Vocab does.
    if (type === TokenType.byte) {
      const b = byteOfPiece(this.pieces[id] as string);
      if (b !== undefined && b < 0x80) return String.fromCharCode(b);
      return this.pieces[id] as string;
    }
    return this.model.detokenize([id as Token], true);
  }

  tokenBytes(id: number): number[] {
    checkTokenId(this, id);
    const piece = this.pieces[id] as string;
    const type = this.types[id];
    if (type === TokenType.byte) {
      const b = byteOfPiece(piece);
      if (b !== undefined) return [b];
    }
    if (type === TokenType.control || type === TokenType.userDefined) return [...Buffer.from(piece, "utf8")];
    if (this.kind === "gpt2") {
      // GPT-2's bytes→unicode table, inverted: byte-level BPE pieces back to their bytes.
      unicodeToByte ??= new Map(BYTE_CHARS.map((c, b) => [c, b]));
      const out: number[] = [];
      for (const ch of piece) {
        const b = unicodeToByte.get(ch);
        if (b === undefined) return [...Buffer.from(piece, "utf8")];
        out.push(b);
      }
      return out;
    }
    if (this.kind === "llama") return [...Buffer.from(piece.replaceAll("\u2581", " "), "utf8")];
    return [...Buffer.from(this.model.detokenize([id as Token], true), "utf8")];
  }

  isSpecial(id: number): boolean {
    checkTokenId(this, id);
    return this.types[id] === TokenType.control;
  }

  /** Release the model this tokenizer was loaded with by {@link load} (not one an executor owns). */
  async dispose(): Promise<void> {
    if (!this.model.disposed) await this.model.dispose();
  }
}

function byteOfPiece(piece: string): number | undefined {
  const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
  return m ? parseInt(m[1] as string, 16) : undefined;
}
