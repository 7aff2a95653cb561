// The model SFT trains, as golden conversations need it: its chat template (Arbor's, or the model's
// Jinja template), its tokenizer's stop ids (the loss ends at the token that ends a turn) and the
// tokenizer metadata its GGUF keeps. From a GGUF, or a fresh model of a given vocabulary.
import { ArborError } from "../core/errors.js";
import { ArborChatFormat } from "../model/arbor-chat-format.js";
import { stopTokenIds } from "../model/chat-template.js";
import type { ChatFormat } from "../model/chat-format.js";
import { readGgufMetadata, vocabTokenizerSpec } from "../model/gguf.js";
import { tokenizerSpecFromGguf, type GgufTokenizerSpec } from "../model/gguf-tokenizer.js";
import { JinjaChatFormat } from "../model/jinja-chat-format.js";
import { madeTokenizerSpec, type MadeModelKind } from "../model/made/made-models.js";
import { tokenizerFromSpec } from "../model/made/tokenizer-from-spec.js";
import { Vocab } from "../model/vocab.js";

/** A vocabulary SFT can start a fresh model with (the run config's `model.vocab`). */
export type SftVocab = "arbor" | MadeModelKind;

/** What SFT needs of a model. */
export interface SftModel {
  format: ChatFormat;
  /** Ids that end an assistant turn: an assistant span's loss ends at the first of them. */
  stopIds: readonly number[];
  /** Tokenizer and template the trained GGUF is written with. */
  spec: GgufTokenizerSpec;
  /** Arbor's vocabulary (then the GGUF is written exactly as the tiny policy's). */
  arbor: boolean;
}

/** The model of a fresh SFT run over `vocab`. */
export function sftModelOf(vocab: SftVocab): SftModel {
  return vocab === "arbor" ? arborModel() : fromSpec(madeTokenizerSpec(vocab), vocab);
}

/** The model stored in the GGUF at `path` (its own tokenizer and template). */
export function sftModelFromGguf(path: string): SftModel {
  const spec = tokenizerSpecFromGguf(readGgufMetadata(path).metadata, path);
  const arbor = new Vocab();
  if (sameTokens(spec.tokens, arbor.pieces) && spec.chatTemplate === undefined) return arborModel();
  return fromSpec(spec, path);
}

function arborModel(): SftModel {
  const vocab = new Vocab();
  return { format: new ArborChatFormat(vocab), stopIds: stopTokenIds(vocab), spec: vocabTokenizerSpec(vocab), arbor: true };
}

function fromSpec(spec: GgufTokenizerSpec, source: string): SftModel {
  if (spec.chatTemplate === undefined) throw new ArborError(`sft: ${source} has no chat template (tokenizer.chat_template): golden conversations cannot be rendered`, "sft");
  const tokenizer = tokenizerFromSpec(spec);
  const format = new JinjaChatFormat({ template: spec.chatTemplate, source, tokenizer });
  return { format, stopIds: tokenizer.stopIds, spec, arbor: false };
}

function sameTokens(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}
