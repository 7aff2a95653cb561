// What the engine's HTTP surface serves a model with: its tokenizer, its chat template and its stop
// tokens. A GGUF with Arbor's vocabulary keeps Arbor's template and tool markup exactly as before;
// any other model is served with llama.cpp's tokenizer of the file (loaded vocabulary-only by the
// engine, so /tokenize works while the executor sleeps), its Jinja `tokenizer.chat_template` and its
// end-of-generation tokens. A weight switch must keep the vocabulary: ids already recorded by the
// gateway would otherwise change meaning.
import { ArborError } from "../core/errors.js";
import type { Clock } from "../core/clock.js";
import type { ChatMessage } from "../core/types.js";
import { ArborChatFormat } from "../model/arbor-chat-format.js";
import { ChatTemplateError, type ChatFormat, type ChatRenderOptions } from "../model/chat-format.js";
import { detectFormats, type DetectedFormats } from "../model/detect-formats.js";
import { JinjaChatFormat } from "../model/jinja-chat-format.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import { CONTROL_TOKENS, Vocab } from "../model/vocab.js";
import type { Executor } from "./executor.js";
import { LlamaTokenizer } from "./llama-tokenizer.js";
import type { LlamaGpu } from "./llama-runtime.js";

/** A model as the HTTP surface serves it. */
export interface ServedModel {
  /** True for Arbor's vocabulary: Arbor's template, tool markup and plain-text prompts. */
  readonly arbor: boolean;
  readonly tokenizer: ModelTokenizer;
  readonly chat: ChatFormat;
  /** Tokens that end an answer by default (the model's end-of-generation set). */
  readonly stopIds: readonly number[];
  /** Characters of the longest token (a text of n characters is at least n / this tokens). */
  readonly maxTokenChars: number;
  /** Whether special-token text in a completion prompt becomes the special token (HF/vLLM: yes; Arbor: no). */
  readonly promptSpecial: boolean;
  /** The tool-call and reasoning parsers its template implies (Arbor's: the markup); config overrides them. */
  readonly formats: DetectedFormats;
  /** Release what the engine loaded for it (a vocabulary-only model). */
  close(): Promise<void>;
}

export interface ServedModelOptions {
  /** A Jinja chat template that replaces the GGUF's (`source` names it in errors). */
  chatTemplate?: { template: string; source: string };
  /** Time for templates' `strftime_now`. */
  clock?: Clock;
  /** The engine's llama.cpp build (its tokenizer is loaded on the same runtime). */
  gpu?: LlamaGpu;
}

const PROBE = "Arbor vocab check: a+b=c";

/**
 * How to serve what `executor` loaded from `modelPath`: Arbor's format when it has no tokenizer of
 * its own or uses Arbor's vocabulary, else the model's (see the file header). Throws an ArborError
 * naming the file when its template does not parse.
 */
export async function resolveServedModel(executor: Executor, modelPath: string, opts: ServedModelOptions = {}): Promise<ServedModel> {
  const own = executor.tokenizer;
  if (!own || isArborVocabulary(own)) {
    if (!own) checkArborExecutor(executor, modelPath);
    return arborModel();
  }
  // The executor's tokenizer lives as long as its model; the engine's must outlive sleep and switches.
  const tokenizer = own instanceof LlamaTokenizer ? await LlamaTokenizer.load(modelPath, opts.gpu ?? false) : own;
  try {
    const template = opts.chatTemplate ?? templateOf(tokenizer, modelPath);
    const chat = template
      ? new JinjaChatFormat({ template: template.template, source: template.source, tokenizer, ...(opts.clock ? { clock: opts.clock } : {}) })
      : new MissingTemplate(modelPath);
    const maxTokenChars = (tokenizer as { maxTokenChars?: number }).maxTokenChars ?? 64;
    return {
      arbor: false,
      tokenizer,
      chat,
      stopIds: tokenizer.stopIds,
      maxTokenChars,
      promptSpecial: true,
      formats: detectFormats(template?.template),
      close: async () => {
        if (tokenizer !== own && tokenizer instanceof LlamaTokenizer) await tokenizer.dispose();
      },
    };
  } catch (err) {
    if (tokenizer !== own && tokenizer instanceof LlamaTokenizer) await tokenizer.dispose();
    if (err instanceof ChatTemplateError) throw new ArborError(`model ${modelPath}: ${err.message}`, "model");
    throw err;
  }
}

/**
 * Arbor's Vocab (the tiny policy's ModelTokenizer, exact to llama.cpp) as the engine serves it, with
 * one difference kept so the engine answers as it always has: decoded text never shows `<s>`, `</s>`
 * or `<unk>`, even where special tokens are asked for (/detokenize, answers read by a tool parser).
 * Arbor's format puts only the chat markers in text, and Vocab renders those anyway; a client that
 * reads `<s>` back through /tokenize (plain text for Arbor) would get three characters, not BOS.
 */
class ServedArborVocab extends Vocab {
  override decode(ids: readonly number[]): string {
    return super.decode(ids);
  }
}

/** Arbor's vocabulary, template and markup. */
export function arborModel(): ServedModel {
  const vocab = new ServedArborVocab();
  return {
    arbor: true,
    tokenizer: vocab,
    chat: new ArborChatFormat(vocab),
    stopIds: vocab.stopIds,
    maxTokenChars: 1,
    promptSpecial: false,
    formats: { toolParser: "arbor" },
    close: async () => {},
  };
}

/**
 * Refuse an executor (a weight switch, a wake-up) whose vocabulary is not the one the engine
 * serves: ids recorded so far would change meaning.
 */
export function checkSameVocabulary(served: ServedModel, executor: Executor, modelPath: string): void {
  const other = executor.tokenizer;
  if (served.arbor) {
    if (!other) return checkArborExecutor(executor, modelPath);
    if (isArborVocabulary(other)) return;
    throw new ArborError(`model ${modelPath}: its vocabulary (${other.size} tokens) is not the served model's (Arbor's, ${served.tokenizer.size} tokens); a weight switch must keep the vocabulary`, "model");
  }
  const why = other ? vocabularyDifference(served.tokenizer, other) : "it has no tokenizer of its own (Arbor's vocabulary)";
  if (why) throw new ArborError(`model ${modelPath}: its vocabulary is not the served model's (${why}); a weight switch must keep the vocabulary`, "model");
}

/** Whether `tok` is Arbor's vocabulary: same size, same ids for plain text and for its control tokens. */
export function isArborVocabulary(tok: ModelTokenizer): boolean {
  const vocab = new Vocab();
  if (tok.size !== vocab.size || !sameIds(tok.encode(PROBE), vocab.encode(PROBE))) return false;
  return CONTROL_TOKENS.every((name) => sameIds(tok.encode(name, { special: true }), [vocab.controlId(name)]));
}

/** Why two tokenizers differ, or undefined when they agree on size, stops, every token's text and a probe. */
function vocabularyDifference(a: ModelTokenizer, b: ModelTokenizer): string | undefined {
  if (a.size !== b.size) return `${b.size} tokens, the served model has ${a.size}`;
  if (!sameIds(a.stopIds, b.stopIds)) return `stop tokens [${b.stopIds.join(", ")}], the served model's are [${a.stopIds.join(", ")}]`;
  // Every token of a small vocabulary; a stride through a large one (a few thousand checks).
  const stride = Math.max(1, Math.floor(a.size / 4096));
  for (let id = 0; id < a.size; id += stride) {
    if (a.tokenText(id) !== b.tokenText(id)) return `token ${id} is ${JSON.stringify(b.tokenText(id))}, the served model's is ${JSON.stringify(a.tokenText(id))}`;
  }
  if (!sameIds(a.encode(PROBE), b.encode(PROBE))) return "it tokenizes text differently";
  return undefined;
}

/** An executor without a tokenizer of its own must tokenize as Arbor's vocabulary does. */
function checkArborExecutor(executor: Executor, modelPath: string): void {
  const vocab = new Vocab();
  if (executor.vocabSize !== vocab.size || !sameIds(executor.tokenize(PROBE), vocab.encode(PROBE))) {
    throw new ArborError(`model ${modelPath}: the executor has no tokenizer of its own and its vocabulary (${executor.vocabSize} tokens) is not Arbor's (${vocab.size} tokens)`, "model");
  }
}

function templateOf(tokenizer: ModelTokenizer, modelPath: string): { template: string; source: string } | undefined {
  const meta = (tokenizer as { metadata?: { tokenizer?: { chat_template?: unknown } } }).metadata;
  const template = meta?.tokenizer?.chat_template;
  return typeof template === "string" && template !== "" ? { template, source: `${modelPath} (tokenizer.chat_template)` } : undefined;
}

/** A model without a chat template serves completions; a chat request is refused with the reason. */
class MissingTemplate implements ChatFormat {
  readonly name: string;
  constructor(private readonly modelPath: string) {
    this.name = `none:${modelPath}`;
  }
  render(_messages: readonly ChatMessage[], _opts: ChatRenderOptions): number[] {
    throw new ChatTemplateError(this.modelPath, "the GGUF has no tokenizer.chat_template (chat requests need one; /v1/completions works without)");
  }
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
