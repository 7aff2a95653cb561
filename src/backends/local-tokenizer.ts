// A served model's tokenizer and chat template loaded into the gateway's process (config
// `backends[].tokenizer`: the model's GGUF), answering the token path's tokenize and detokenize as the
// engine's own /tokenize and /detokenize do (vLLM's semantics, as engine/http/tokenize-routes.ts serves
// them): chat messages rendered with the model's template, no BOS added; a text with special tokens' text
// read as their ids and BOS added where asked and the tokenizer adds one; ids decoded with special tokens
// as their text (Arbor's vocabulary: plain text stays text, specials decode to nothing). Where only the
// engine can say (tools in another shape than the template is given, a tool_choice, a render the template
// refuses, an id outside the vocabulary) it answers `undefined` and the caller asks the engine.
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import { ArborChatFormat } from "../model/arbor-chat-format.js";
import { ChatTemplateError, type ChatFormat } from "../model/chat-format.js";
import type { ChatToolSpec } from "../model/chat-template.js";
import { readGgufMetadata } from "../model/gguf.js";
import { tokenizerSpecFromGguf } from "../model/gguf-tokenizer.js";
import { JinjaChatFormat } from "../model/jinja-chat-format.js";
import { tokenizerFromSpec } from "../model/made/tokenizer-from-spec.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import { Vocab } from "../model/vocab.js";
import type { TokenizeRequest } from "./backend.js";

/** A model's tokenizer and chat template as an engine serves them. */
export interface ServedTokenizer {
  readonly tokenizer: ModelTokenizer;
  readonly chat: ChatFormat;
  /** Arbor's vocabulary: special-token text in a plain prompt stays text, and decoded text never shows specials. */
  readonly arbor: boolean;
  /** The file it was loaded from (named in errors). */
  readonly source: string;
}

/** Tokenize and detokenize in process; `undefined` where the engine must answer (see the file header). */
export interface LocalTokenizer {
  readonly source: string;
  tokenize(req: TokenizeRequest): number[] | undefined;
  detokenize(ids: readonly number[]): string | undefined;
}

/**
 * Load the tokenizer and chat template of the GGUF at `path` (Arbor's vocabulary with Arbor's template,
 * or the model's own with its `tokenizer.chat_template`). Throws an ArborError naming `where` and the reason.
 */
export function loadServedTokenizer(path: string, where: string): ServedTokenizer {
  if (!path.endsWith(".gguf")) throw new ArborError(`${where}: ${JSON.stringify(path)} is not a .gguf file (the served model's GGUF, whose tokenizer and chat template the engine uses)`, "config");
  let meta: Map<string, unknown>;
  try {
    meta = readGgufMetadata(path).metadata;
  } catch (e) {
    throw new ArborError(`${where}: cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`, "config");
  }
  try {
    const spec = tokenizerSpecFromGguf(meta, path);
    const vocab = new Vocab();
    if (spec.chatTemplate === undefined && spec.tokens.length === vocab.size && spec.tokens.every((t, i) => t === vocab.pieces[i])) {
      return { tokenizer: vocab, chat: new ArborChatFormat(vocab), arbor: true, source: path };
    }
    if (spec.chatTemplate === undefined) throw new Error("it has no tokenizer.chat_template (the gateway renders chat prompts with it)");
    const tokenizer = tokenizerFromSpec(spec);
    return { tokenizer, chat: new JinjaChatFormat({ template: spec.chatTemplate, source: path, tokenizer }), arbor: false, source: path };
  } catch (e) {
    if (e instanceof ArborError) throw e;
    throw new ArborError(`${where}: ${path}: ${e instanceof Error ? e.message : String(e)}`, "config");
  }
}

/** The in-process tokenize and detokenize of a served tokenizer (see the file header). */
export function localTokenizer(served: ServedTokenizer): LocalTokenizer {
  const { tokenizer: tok, chat } = served;
  return {
    source: served.source,
    tokenize(req) {
      if ("messages" in req) {
        // A forced call's opening (Arbor's engine) and Arbor's tool markup are the engine's to render.
        if (req.tools?.length && (req.toolChoice != null || served.arbor)) return undefined;
        const tools = req.tools?.length ? templateTools(req.tools) : [];
        if (tools === undefined) return undefined;
        try {
          return chat.render(req.messages as ChatMessage[], {
            addGenerationPrompt: req.addGenerationPrompt,
            ...(req.continueFinalMessage === true ? { continueFinalMessage: true } : {}),
            ...(tools.length ? { tools } : {}),
          });
        } catch (e) {
          // The engine refuses it in its own words (a role the template rejects, say).
          if (e instanceof ChatTemplateError) return undefined;
          throw e;
        }
      }
      const ids = tok.encode(req.text, { special: served.arbor ? req.parseSpecial === true : true });
      if (req.addSpecialTokens && tok.addBos && tok.bosId !== undefined) ids.unshift(tok.bosId);
      return ids;
    },
    detokenize(ids) {
      for (const id of ids) if (!(Number.isInteger(id) && id >= 0 && id < tok.size)) return undefined;
      return served.arbor ? tok.decode(ids) : tok.decode(ids, { special: true });
    },
  };
}

/**
 * OpenAI tool definitions as the template gets them, where that is exact: `JinjaChatFormat` gives a
 * template `{type: "function", function: {name, description?, parameters?}}` in that key order, which
 * is what the engine passes on only when the client's definition had that very shape (key order
 * included: templates write `tool | tojson`). Anything else: undefined (the engine renders it).
 */
function templateTools(tools: readonly unknown[]): ChatToolSpec[] | undefined {
  const out: ChatToolSpec[] = [];
  for (const t of tools) {
    if (typeof t !== "object" || t === null) return undefined;
    const { type, function: fn } = t as { type?: unknown; function?: unknown };
    if (type !== "function" || !sameKeys(t, ["type", "function"]) || typeof fn !== "object" || fn === null) return undefined;
    const f = fn as { name?: unknown; description?: unknown; parameters?: unknown };
    if (typeof f.name !== "string") return undefined;
    if (f.description !== undefined && typeof f.description !== "string") return undefined;
    if (f.parameters !== undefined && (typeof f.parameters !== "object" || f.parameters === null || Array.isArray(f.parameters))) return undefined;
    const keys = ["name", ...(f.description !== undefined ? ["description"] : []), ...(f.parameters !== undefined ? ["parameters"] : [])];
    if (!sameKeys(fn, keys)) return undefined;
    out.push({ name: f.name, ...(f.description !== undefined ? { description: f.description } : {}), ...(f.parameters !== undefined ? { parameters: f.parameters as Record<string, unknown> } : {}) });
  }
  return out;
}

function sameKeys(o: object, keys: readonly string[]): boolean {
  const own = Object.keys(o);
  return own.length === keys.length && own.every((k, i) => k === keys[i]);
}
