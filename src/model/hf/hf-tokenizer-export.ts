// A GGUF's tokenizer as Hugging Face tokenizer files: `tokenizer.json` (the `tokenizers` library's
// format) and `tokenizer_config.json` (transformers' special tokens and chat template).
//   SPM ("llama"): Llama-2 style, as transformers' LlamaConverter writes it: a BPE model with
//     byte_fallback over the pieces, merges derived from pieces and scores (spm-merges.ts), spaces
//     replaced by "▁" in the normalizer (and "▁" prepended when the GGUF adds a space prefix), a
//     decoder that undoes both and fuses byte tokens.
//   byte-level BPE ("gpt2"): the GGUF's merges, a ByteLevel pre-tokenizer/decoder and the split regex
//     of its `tokenizer.ggml.pre` type (byte-level-pre.ts).
// Control and user-defined tokens become `added_tokens` (special for control tokens).

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { TokenType } from "../vocab.js";
import { ARBOR_CHAT_TEMPLATE, isArborVocabulary } from "./arbor-jinja-template.js";
import { byteLevelPre } from "./byte-level-pre.js";
import { spmMerges } from "./spm-merges.js";

/** The exported files' JSON and the special-token ids config.json and generation_config.json need. */
export interface HfTokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** ids that end generation: EOS, then EOT when the GGUF has a distinct one. */
  eosIds: number[];
}

const SPACE = "\u2581";
/** llama.cpp's name for the vocabulary slots convert_hf_to_gguf.py pads a model's embedding rows with. */
export const PAD_SLOT = /^\[PAD\d+\]$/;

/** Hugging Face tokenizer files of a GGUF tokenizer; `source` (the GGUF) prefixes errors. */
export function hfTokenizerFiles(tok: GgufTokenizerSpec, opts: { source: string; contextLength: number }): HfTokenizerFiles {
  const { source } = opts;
  const vocab: Record<string, number> = {};
  const added: Record<string, unknown>[] = [];
  const isSpm = tok.model === "llama";
  tok.tokens.forEach((piece, id) => {
    const type = tok.types[id] as number;
    // Padding slots exist only to fill the embedding table; HF leaves those ids out of the vocabulary.
    if (type === TokenType.unused && PAD_SLOT.test(piece)) return;
    const special = type === TokenType.control || (type === TokenType.unknown && isSpm);
    if (special || type === TokenType.userDefined) {
      added.push({ id, content: piece, single_word: false, lstrip: false, rstrip: false, normalized: false, special });
      // Llama-2 keeps its specials in the model vocabulary too; byte-level models (Qwen) do not.
      if (!isSpm) return;
    }
    if (Object.hasOwn(vocab, piece)) throw new Error(`${source}: token ${id} '${piece}' repeats token ${vocab[piece]}; a Hugging Face vocabulary needs unique pieces`);
    vocab[piece] = id;
  });

  const name = (id: number | undefined): string | null => (id === undefined ? null : (tok.tokens[id] as string));
  const bos = name(tok.bosId);
  const eos = name(tok.eosId);
  const addBos = tok.addBos ?? isSpm;
  const addEos = tok.addEos ?? false;
  const template = postProcessor(tok, addBos, addEos);

  let tokenizerJson: Record<string, unknown>;
  if (isSpm) {
    const scores = tok.scores ?? tok.tokens.map(() => 0);
    const merges = spmMerges(tok.tokens, scores).map(([l, r]) => mergeString(l, r, source));
    const addPrefix = tok.addSpacePrefix ?? true;
    const replace = { type: "Replace", pattern: { String: " " }, content: SPACE };
    tokenizerJson = {
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: added,
      normalizer: { type: "Sequence", normalizers: addPrefix ? [{ type: "Prepend", prepend: SPACE }, replace] : [replace] },
      pre_tokenizer: null,
      post_processor: template,
      decoder: {
        type: "Sequence",
        decoders: [
          { type: "Replace", pattern: { String: SPACE }, content: " " },
          { type: "ByteFallback" },
          { type: "Fuse" },
          ...(addPrefix ? [{ type: "Strip", content: " ", start: 1, stop: 0 }] : []),
        ],
      },
      model: {
        type: "BPE",
        dropout: null,
        unk_token: name(tok.unkId),
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: true,
        byte_fallback: true,
        ignore_merges: false,
        vocab,
        merges,
      },
    };
  } else {
    const pre = byteLevelPre(tok.pre ?? "gpt2", source);
    const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };
    tokenizerJson = {
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: added,
      normalizer: pre.normalizer,
      pre_tokenizer: pre.preTokenizer,
      post_processor: template ? { type: "Sequence", processors: [byteLevel, template] } : byteLevel,
      decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: {
        type: "BPE",
        dropout: null,
        unk_token: null,
        continuing_subword_prefix: "",
        end_of_word_suffix: "",
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: pre.ignoreMerges,
        vocab,
        merges: tok.merges ?? [],
      },
    };
  }

  const addedDecoder: Record<string, unknown> = {};
  for (const a of added) {
    const { id, ...rest } = a;
    addedDecoder[String(id)] = rest;
  }
  const chatTemplate = tok.chatTemplate ?? (isArborVocabulary(tok.tokens, tok.types) ? ARBOR_CHAT_TEMPLATE : undefined);
  const tokenizerConfig: Record<string, unknown> = {
    // Written only when the GGUF says, so the conversion back leaves an absent flag absent.
    ...(tok.addBos !== undefined ? { add_bos_token: tok.addBos } : {}),
    ...(tok.addEos !== undefined ? { add_eos_token: tok.addEos } : {}),
    added_tokens_decoder: addedDecoder,
    bos_token: bos,
    eos_token: eos,
    unk_token: name(tok.unkId),
    pad_token: name(tok.padId),
    clean_up_tokenization_spaces: false,
    model_max_length: opts.contextLength,
    tokenizer_class: isSpm ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast",
    ...(isSpm ? { legacy: true } : {}),
    ...(chatTemplate !== undefined ? { chat_template: chatTemplate } : {}),
  };
  const eosIds = [tok.eosId, tok.eotId].filter((x, i, all): x is number => x !== undefined && all.indexOf(x) === i);
  return { tokenizerJson, tokenizerConfig, eosIds };
}

/** tokenizers' TemplateProcessing adding BOS / EOS around a sequence, or null when neither is added. */
function postProcessor(tok: GgufTokenizerSpec, addBos: boolean, addEos: boolean): Record<string, unknown> | null {
  const bos = addBos && tok.bosId !== undefined ? (tok.tokens[tok.bosId] as string) : undefined;
  const eos = addEos && tok.eosId !== undefined ? (tok.tokens[tok.eosId] as string) : undefined;
  if (bos === undefined && eos === undefined) return null;
  const seq = (id: "A" | "B", typeId: number): unknown[] => [
    ...(bos !== undefined ? [{ SpecialToken: { id: bos, type_id: typeId } }] : []),
    { Sequence: { id, type_id: typeId } },
    ...(eos !== undefined ? [{ SpecialToken: { id: eos, type_id: typeId } }] : []),
  ];
  const specials: Record<string, unknown> = {};
  if (bos !== undefined) specials[bos] = { id: bos, ids: [tok.bosId], tokens: [bos] };
  if (eos !== undefined) specials[eos] = { id: eos, ids: [tok.eosId], tokens: [eos] };
  return { type: "TemplateProcessing", single: seq("A", 0), pair: [...seq("A", 0), ...seq("B", 1)], special_tokens: specials };
}

function mergeString(l: string, r: string, source: string): string {
  // The "left right" form cannot hold a piece with a space; SPM pieces never have one (spaces are ▁).
  if (l.includes(" ") || r.includes(" ")) throw new Error(`${source}: SPM piece '${l}${r}' contains a space; it cannot be written as a merge`);
  return `${l} ${r}`;
}
