// Hugging Face tokenizer files → a GGUF tokenizer, as llama.cpp's convert_hf_to_gguf.py reads them:
//   byte_fallback BPE (Llama-2 style tokenizer.json) → SPM "llama": byte pieces typed BYTE, the unknown
//     token UNKNOWN, added special tokens CONTROL, other added tokens USER_DEFINED; scores from merge
//     ranks (spm-merges.ts), since tokenizer.json keeps merges, not scores; add_space_prefix from the
//     normalizer's Prepend("▁") or a Metaspace pre-tokenizer.
//   byte-level BPE → "gpt2" with its merges and the `tokenizer.ggml.pre` type its split regex names
//     (byte-level-pre.ts); ids the tokenizer lacks up to config.json's vocab_size become "[PAD{id}]"
//     UNUSED slots, and added tokens CONTROL when special or looking special (`<|…|>`), as
//     `get_vocab_base` / `does_token_look_special` do.
// Special ids come from tokenizer_config.json's *_token names, else config.json's *_token_id; an EOT
// id from generation_config.json when its eos_token_id list names exactly one id besides EOS, BOS and
// padding (Arbor's <|end|>; convert_hf_to_gguf.py leaves EOT to llama.cpp's detection by token text).

import type { GgufTokenizerSpec } from "../gguf-tokenizer.js";
import { TokenType } from "../vocab.js";
import { ARBOR_CHAT_TEMPLATE } from "./arbor-jinja-template.js";
import { detectByteLevelPre } from "./byte-level-pre.js";
import { scoresFromMerges } from "./spm-merges.js";

/** The JSON files of a HF checkpoint the tokenizer comes from, with their paths for errors. */
export interface HfTokenizerSources {
  tokenizerJson: { path: string; json: Record<string, unknown> };
  tokenizerConfig?: { path: string; json: Record<string, unknown> };
  config: { path: string; json: Record<string, unknown> };
  generationConfig?: { path: string; json: Record<string, unknown> };
  /** chat_template.jinja beside tokenizer_config.json (newer transformers save it there). */
  chatTemplateFile?: string;
}

interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}

/** The GGUF tokenizer of a HF checkpoint whose embedding table has `vocabSize` rows. */
export function ggufTokenizerFromHf(src: HfTokenizerSources, vocabSize: number): GgufTokenizerSpec {
  const tjPath = src.tokenizerJson.path;
  const model = src.tokenizerJson.json.model as { type?: unknown; vocab?: unknown; merges?: unknown; byte_fallback?: unknown; unk_token?: unknown } | undefined;
  if (!model || typeof model !== "object") throw new Error(`${tjPath}: no "model" object`);
  if (model.type !== "BPE") throw new Error(`${tjPath}: tokenizer model type '${String(model.type)}' is not supported (BPE, byte-level or with byte_fallback, is)`);
  if (typeof model.vocab !== "object" || model.vocab === null || Array.isArray(model.vocab)) throw new Error(`${tjPath}: model.vocab is not an object`);
  const merges = parseMerges(model.merges, tjPath);
  const added = parseAdded(src.tokenizerJson.json.added_tokens, tjPath);

  const pieces: (string | undefined)[] = new Array(vocabSize).fill(undefined);
  const place = (piece: string, id: unknown, what: string): void => {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0) throw new Error(`${tjPath}: ${what} '${piece}' has a bad id ${String(id)}`);
    if (id >= vocabSize) throw new Error(`${tjPath}: ${what} '${piece}' has id ${id}, beyond config.json vocab_size ${vocabSize}`);
    const had = pieces[id];
    if (had !== undefined && had !== piece) throw new Error(`${tjPath}: id ${id} is both '${had}' and '${piece}'`);
    pieces[id] = piece;
  };
  for (const [piece, id] of Object.entries(model.vocab as Record<string, unknown>)) place(piece, id, "token");
  for (const a of added) place(a.content, a.id, "added token");
  const addedById = new Map(added.map((a) => [a.id, a]));

  const tc = src.tokenizerConfig?.json ?? {};
  const idOf = new Map<string, number>();
  pieces.forEach((p, i) => {
    if (p !== undefined && !idOf.has(p)) idOf.set(p, i);
  });
  const special = (typ: string): number | undefined => {
    const v = tc[`${typ}_token`];
    const content = typeof v === "string" ? v : typeof v === "object" && v !== null ? (v as { content?: unknown }).content : undefined;
    if (typeof content === "string") {
      const id = idOf.get(content);
      if (id === undefined) throw new Error(`${src.tokenizerConfig?.path}: ${typ}_token '${content}' is not a token of ${tjPath}`);
      return id;
    }
    const fromConfig = src.config.json[`${typ}_token_id`];
    return typeof fromConfig === "number" && Number.isInteger(fromConfig) && fromConfig >= 0 && fromConfig < vocabSize ? fromConfig : undefined;
  };

  let tok: GgufTokenizerSpec;
  if (model.byte_fallback === true) {
    const unkName = typeof model.unk_token === "string" ? model.unk_token : undefined;
    const tokens = pieces.map((p, i) => p ?? `[PAD${i}]`);
    const types = pieces.map((p, i): number => {
      if (p === undefined) return TokenType.unused;
      if (p === unkName) return TokenType.unknown;
      const a = addedById.get(i);
      if (a) return a.special ? TokenType.control : TokenType.userDefined;
      return /^<0x[0-9A-Fa-f]{2}>$/.test(p) ? TokenType.byte : TokenType.normal;
    });
    tok = { model: "llama", tokens, types, scores: scoresFromMerges(tokens, merges), addSpacePrefix: spmAddsSpacePrefix(src.tokenizerJson.json) };
    const unk = unkName === undefined ? undefined : idOf.get(unkName);
    if (unk !== undefined) tok.unkId = unk;
  } else {
    if (!usesByteLevel(src.tokenizerJson.json)) {
      throw new Error(`${tjPath}: a BPE tokenizer that is neither byte-level nor byte_fallback (SentencePiece-style) is not supported`);
    }
    const pre = detectByteLevelPre(src.tokenizerJson.json.pre_tokenizer, tjPath);
    const tokens = pieces.map((p, i) => p ?? `[PAD${i}]`);
    const types = pieces.map((p, i): number => {
      if (p === undefined) return TokenType.unused;
      const a = addedById.get(i);
      if (!a) return TokenType.normal;
      return a.special || looksSpecial(p) ? TokenType.control : TokenType.userDefined;
    });
    tok = { model: "gpt2", pre, tokens, types, merges: merges.map(([l, r]) => `${l} ${r}`) };
  }

  const set = (k: "bosId" | "eosId" | "padId", v: number | undefined): void => {
    if (v !== undefined) tok[k] = v;
  };
  set("bosId", special("bos"));
  set("eosId", special("eos"));
  if (tok.unkId === undefined && tok.model === "gpt2") {
    const unk = special("unk");
    if (unk !== undefined) tok.unkId = unk;
  }
  set("padId", special("pad"));
  const eot = eotFromGeneration(src.generationConfig?.json, [tok.eosId, tok.bosId, tok.padId]);
  if (eot !== undefined) tok.eotId = eot;
  // As gguf-py's SpecialVocab: the post-processor's template says whether BOS/EOS are added, and
  // tokenizer_config.json's add_bos_token / add_eos_token, when present, decide.
  const fromTemplate = templateAdds(src.tokenizerJson.json.post_processor, tok.bosId === undefined ? undefined : tok.tokens[tok.bosId], tok.eosId === undefined ? undefined : tok.tokens[tok.eosId]);
  const addBos = typeof tc.add_bos_token === "boolean" ? tc.add_bos_token : fromTemplate.bos;
  const addEos = typeof tc.add_eos_token === "boolean" ? tc.add_eos_token : fromTemplate.eos;
  if (addBos !== undefined) tok.addBos = addBos;
  if (addEos !== undefined) tok.addEos = addEos;
  const template = chatTemplate(tc, src);
  // Arbor's own template is what Arbor's engine renders for its vocabulary natively: not stored, so a
  // round-tripped tiny policy is the file it was.
  if (template !== undefined && template !== ARBOR_CHAT_TEMPLATE) tok.chatTemplate = template;
  return tok;
}

/** Whether a TemplateProcessing post-processor (alone or in a Sequence) puts BOS first / EOS last of a single sequence. */
function templateAdds(pp: unknown, bos: string | undefined, eos: string | undefined): { bos?: boolean; eos?: boolean } {
  if (typeof pp !== "object" || pp === null) return {};
  const o = pp as { type?: unknown; processors?: unknown; single?: unknown };
  const list = o.type === "Sequence" && Array.isArray(o.processors) ? (o.processors as unknown[]) : [pp];
  for (const p of list) {
    const t = p as { type?: unknown; single?: unknown };
    if (t?.type !== "TemplateProcessing" || !Array.isArray(t.single) || t.single.length < 2) continue;
    const special = (x: unknown): string | undefined => (x as { SpecialToken?: { id?: unknown } })?.SpecialToken?.id as string | undefined;
    const first = special(t.single[0]);
    const last = special(t.single[t.single.length - 1]);
    return { bos: first !== undefined && first === bos, eos: last !== undefined && last === eos };
  }
  return {};
}

function parseMerges(raw: unknown, path: string): [string, string][] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw new Error(`${path}: model.merges is not an array`);
  return raw.map((m, i): [string, string] => {
    // tokenizers writes "left right" (before 0.20) or ["left", "right"].
    if (typeof m === "string") {
      const at = m.indexOf(" ", 1);
      if (at < 0) throw new Error(`${path}: model.merges[${i}] '${m}' is not "left right"`);
      return [m.slice(0, at), m.slice(at + 1)];
    }
    if (Array.isArray(m) && m.length === 2 && typeof m[0] === "string" && typeof m[1] === "string") return [m[0], m[1]];
    throw new Error(`${path}: model.merges[${i}] is neither "left right" nor a pair of strings`);
  });
}

function parseAdded(raw: unknown, path: string): AddedToken[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new Error(`${path}: added_tokens is not an array`);
  return raw.map((a, i) => {
    const o = a as { id?: unknown; content?: unknown; special?: unknown };
    if (typeof o?.content !== "string" || typeof o.id !== "number") throw new Error(`${path}: added_tokens[${i}] needs an id and a content`);
    return { id: o.id, content: o.content, special: o.special === true };
  });
}

/** convert_hf_to_gguf.py's `does_token_look_special`. */
function looksSpecial(t: string): boolean {
  return (
    ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(t) ||
    (t.startsWith("<|") && t.endsWith("|>")) ||
    (t.startsWith("<\uff5c") && t.endsWith("\uff5c>")) ||
    (t.startsWith("<unused") && t.endsWith(">"))
  );
}

function usesByteLevel(tj: Record<string, unknown>): boolean {
  return JSON.stringify(tj.pre_tokenizer ?? null).includes('"ByteLevel"') || JSON.stringify(tj.decoder ?? null).includes('"ByteLevel"');
}

function spmAddsSpacePrefix(tj: Record<string, unknown>): boolean {
  const norm = JSON.stringify(tj.normalizer ?? null);
  if (norm.includes('"Prepend"')) return true;
  const pre = tj.pre_tokenizer as { type?: unknown; prepend_scheme?: unknown; add_prefix_space?: unknown } | null | undefined;
  if (pre?.type === "Metaspace") return pre.prepend_scheme !== undefined ? pre.prepend_scheme !== "never" : pre.add_prefix_space !== false;
  return false;
}

/** The one end-of-generation id besides EOS (BOS and padding ids, e.g. Qwen's <|endoftext|>, are not turn ends). */
function eotFromGeneration(gen: Record<string, unknown> | undefined, known: (number | undefined)[]): number | undefined {
  const ids = gen?.eos_token_id;
  if (!Array.isArray(ids)) return undefined;
  const others = ids.filter((x): x is number => typeof x === "number" && !known.includes(x));
  return others.length === 1 ? others[0] : undefined;
}

function chatTemplate(tc: Record<string, unknown>, src: HfTokenizerSources): string | undefined {
  const t = tc.chat_template;
  if (typeof t === "string") return t;
  if (Array.isArray(t)) {
    // Several named templates: the "default" one is the chat template (as SpecialVocab takes it).
    const d = t.find((x) => (x as { name?: unknown })?.name === "default") as { template?: unknown } | undefined;
    if (typeof d?.template === "string") return d.template;
    throw new Error(`${src.tokenizerConfig?.path}: chat_template is a list without a "default" template`);
  }
  return src.chatTemplateFile;
}
