// An in-memory TokenBackend for the gateway's token-path tests: a chat model's format (a Jinja chat
// template rendered by the engine's JinjaChatFormat over a small tokenizer, or Arbor's own template
// and vocabulary) behind tokenize/detokenize, and a scripted engine whose every answer is exactly the
// format's rendering of an assistant turn the test chooses, cut after the turn's stop token. The
// tokenizer is deliberately simple (control and added tokens matched greedily, one id per other
// character), so the only way a prompt can differ from the template's render is the gateway's own
// doing. Test support only.
import type { BackendMetrics, GenerateRequest, GenerateResult, GenerateStream, TokenBackend, TokenDelta, TokenizeRequest, TokenizeResult } from "../backends/backend.js";
import type { ChatMessage } from "../core/types.js";
import { ArborChatFormat } from "../model/arbor-chat-format.js";
import type { ChatFormat } from "../model/chat-format.js";
import { JinjaChatFormat } from "../model/jinja-chat-format.js";
import type { ReasoningParser } from "../model/reasoning/reasoning-parser.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import { toolSpecs, type ToolFields } from "../model/tool-markup.js";
import type { ToolCallParser } from "../model/tool-parsers/tool-parser.js";
import { CONTROL_TOKENS, Vocab } from "../model/vocab.js";

/** A model's chat format and tokenizer, as its engine's /tokenize and /detokenize use them. */
export interface ChatModel {
  readonly name: string;
  /** Prompt ids of a conversation (tools in OpenAI's shape), as the engine's chat template renders it (`continueFinal`: the final message left open). */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean, tools?: readonly unknown[], continueFinal?: boolean): number[];
  /** Ids of a text; with `parseSpecial` the text of special tokens becomes their ids. */
  encode(text: string, parseSpecial: boolean): number[];
  /** Text of ids as /detokenize gives it (control tokens as nothing for Jinja models). */
  decode(ids: readonly number[]): string;
  /** Ids that end an assistant turn. */
  readonly stopIds: readonly number[];
}

const CHAR_BASE = 1000;

/** Control tokens, added tokens and one id per other character (code point). */
class CharTokenizer implements ModelTokenizer {
  readonly size = CHAR_BASE + 0x110000;
  readonly bosId = undefined;
  readonly eosId: number | undefined;
  readonly stopIds: readonly number[];
  readonly addBos = false;
  private readonly specials: string[];
  private readonly byLength: string[];

  constructor(
    private readonly control: readonly string[],
    added: readonly string[],
    stop: readonly string[],
  ) {
    this.specials = [...control, ...added];
    // Longest first, so a token that is a prefix of another never wins over it.
    this.byLength = [...this.specials].sort((a, b) => b.length - a.length);
    this.stopIds = stop.map((s) => this.specials.indexOf(s) + 1);
    this.eosId = this.stopIds[0];
  }

  encode(text: string, opts: { special?: boolean } = {}): number[] {
    const ids: number[] = [];
    let i = 0;
    outer: while (i < text.length) {
      if (opts.special === true) {
        for (const s of this.byLength) {
          if (text.startsWith(s, i)) {
            ids.push(this.specials.indexOf(s) + 1);
            i += s.length;
            continue outer;
          }
        }
      }
      const cp = text.codePointAt(i) as number;
      ids.push(CHAR_BASE + cp);
      i += cp > 0xffff ? 2 : 1;
    }
    return ids;
  }

  decode(ids: readonly number[], opts: { special?: boolean } = {}): string {
    return ids.map((id) => (id >= CHAR_BASE || opts.special === true || !this.isSpecial(id) ? this.tokenText(id) : "")).join("");
  }

  tokenText(id: number): string {
    return id >= CHAR_BASE ? String.fromCodePoint(id - CHAR_BASE) : (this.specials[id - 1] ?? "");
  }

  tokenBytes(id: number): number[] {
    return [...Buffer.from(this.tokenText(id), "utf8")];
  }

  /** Control tokens only: added tokens (`<tool_call>`, `<think>`) decode as text, as in Qwen's tokenizer. */
  isSpecial(id: number): boolean {
    return id >= 1 && id <= this.control.length;
  }
}

/** Declared OpenAI tools as the chat formats take them. */
const specsOf = (tools: readonly unknown[] | undefined) => (tools && tools.length > 0 ? { tools: toolSpecs(tools as NonNullable<ToolFields["tools"]>) } : {});

/** A Jinja-templated model over a tokenizer of `control` tokens (decoded as nothing), `added` tokens and one id per character. */
export function jinjaChatModel(name: string, template: string, control: readonly string[], added: readonly string[], stop: readonly string[]): ChatModel {
  const tok = new CharTokenizer(control, added, stop);
  const format: ChatFormat = new JinjaChatFormat({ template, source: name, tokenizer: tok, bosToken: "", eosToken: stop[0] ?? "" });
  return {
    name,
    render: (messages, addGenerationPrompt, tools, continueFinal) =>
      format.render(messages, { addGenerationPrompt, ...(continueFinal === true ? { continueFinalMessage: true } : {}), ...specsOf(tools) }),
    encode: (text, parseSpecial) => tok.encode(text, { special: parseSpecial }),
    decode: (ids) => tok.decode(ids),
    stopIds: tok.stopIds,
  };
}

/** Arbor's tiny policy's format: its template (tools as a system turn, calls as markup) and vocabulary. */
export function arborChatModel(): ChatModel {
  const vocab = new Vocab();
  const format = new ArborChatFormat(vocab);
  return {
    name: "arbor",
    render: (messages, addGenerationPrompt, tools, continueFinal) =>
      format.render(messages, { addGenerationPrompt, ...(continueFinal === true ? { continueFinalMessage: true } : {}), ...specsOf(tools) }),
    encode: (text, parseSpecial) => (parseSpecial ? encodeParsingControl(vocab, text) : vocab.encode(text)),
    decode: (ids) => vocab.decode(ids),
    stopIds: [vocab.controlId("<|end|>")],
  };
}

function encodeParsingControl(vocab: Vocab, text: string): number[] {
  const ids: number[] = [];
  let at = 0;
  for (;;) {
    let next = -1;
    let marker = "";
    for (const m of CONTROL_TOKENS) {
      const i = text.indexOf(m, at);
      if (i >= 0 && (next < 0 || i < next)) [next, marker] = [i, m];
    }
    const plain = text.slice(at, next < 0 ? text.length : next);
    if (plain !== "") ids.push(...vocab.encode(plain));
    if (next < 0) return ids;
    ids.push(vocab.controlId(marker));
    at = next + marker.length;
  }
}

/** An assistant turn the scripted engine answers with. */
export interface ScriptedTurn {
  content: string;
  toolCalls?: { name: string; arguments: string }[];
  reasoning?: string;
}

export interface TemplateBackend extends TokenBackend {
  /** What the next generation answers: `turn` as the model renders it after `history` with `tools`. */
  script(next: { history: ChatMessage[]; tools?: unknown[]; turn: ScriptedTurn }): void;
}

/** The assistant message of a scripted turn (call ids are not rendered by the templates). */
export function turnMessage(turn: ScriptedTurn): ChatMessage {
  return {
    role: "assistant",
    content: turn.content,
    ...(turn.toolCalls?.length ? { toolCalls: turn.toolCalls.map((c, i) => ({ id: `call_scripted_${i}`, ...c })) } : {}),
    ...(turn.reasoning !== undefined ? { reasoning: turn.reasoning } : {}),
  };
}

/** A scripted in-memory backend serving `model`, its answers read with the given parsers. */
export function templateBackend(opts: { name: string; model: ChatModel; toolParser?: ToolCallParser; reasoningParser?: ReasoningParser }): TemplateBackend {
  const { name, model } = opts;
  const url = `http://127.0.0.1:9/${name}/v1`;
  let next: { history: ChatMessage[]; tools?: unknown[]; turn: ScriptedTurn } | undefined;

  function answer(req: GenerateRequest): GenerateResult {
    if (!next) throw new Error(`scripted backend '${name}': no turn scripted for this generation`);
    const { history, tools, turn } = next;
    next = undefined;
    const full = model.render([...history, turnMessage(turn)], false, tools);
    const prompt = req.promptTokenIds;
    let start = prompt.length;
    if (!startsWith(full, prompt)) {
      // The gateway's prompt is not this render's prefix (the test then sees a mismatch): answer the turn anyway.
      const open = model.render(history, true, tools);
      if (!startsWith(full, open)) throw new Error(`scripted backend '${name}': the turn does not continue the generation prompt`);
      start = open.length;
      // A forced call's opening after the generation prompt: the model continues the call where the
      // turn writes it (after a `<think>` block the template puts first, say).
      if (prompt.length > open.length && startsWith(prompt, open)) {
        const forced = prompt.slice(open.length);
        const at = indexOfIds(full, forced, open.length);
        if (at >= 0) start = at + forced.length;
      }
    }
    let out = full.slice(start);
    const stop = out.findIndex((id) => model.stopIds.includes(id));
    const stopped = stop >= 0 && stop < req.maxTokens;
    out = stopped ? out.slice(0, stop + 1) : out.slice(0, req.maxTokens);
    return { outputTokenIds: out, logprobs: out.map(() => -0.5), finishReason: stopped ? "stop" : "length", policyVersion: 1, promptTokenIds: prompt };
  }

  const metrics: BackendMetrics = { running: 0, waiting: 0, kvUsage: 0, kvCapacityTokens: null, prefixCacheQueries: null, prefixCacheHits: null, prefixCacheHitRate: null };
  return {
    name,
    url,
    type: "scripted",
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: false },
    ...(opts.toolParser ? { toolParser: opts.toolParser } : {}),
    ...(opts.reasoningParser ? { reasoningParser: opts.reasoningParser } : {}),
    script(n) {
      next = n;
    },
    async chatCompletions() {
      return { status: 500, json: { error: { message: `scripted backend '${name}' has no passthrough`, type: "server_error", param: null, code: null } } };
    },
    async completions() {
      return { status: 500, json: { error: { message: `scripted backend '${name}' has no passthrough`, type: "server_error", param: null, code: null } } };
    },
    async models() {
      return { object: "list", data: [{ id: name, object: "model" }] };
    },
    async health() {},
    async generate(req) {
      return answer(req);
    },
    async generateStream(req): Promise<GenerateStream> {
      const result = answer(req);
      const ids = result.outputTokenIds;
      async function* deltas(): AsyncGenerator<TokenDelta> {
        // Uneven pieces, so markup is split across deltas.
        for (let i = 0, n = 1; i < ids.length; i += n, n = (n % 4) + 1) {
          yield { ids: ids.slice(i, i + n), logprobs: result.logprobs.slice(i, i + n), policyVersion: 1 };
        }
      }
      return { deltas: deltas(), result: () => result };
    },
    async tokenize(req: TokenizeRequest): Promise<TokenizeResult> {
      if ("messages" in req) return { tokens: model.render(req.messages, req.addGenerationPrompt, req.tools, req.continueFinalMessage === true), maxModelLen: 1_000_000 };
      return { tokens: model.encode(req.text, req.parseSpecial === true), maxModelLen: 1_000_000 };
    },
    async detokenize(ids) {
      return model.decode(ids);
    },
    async scrapeMetrics() {
      return metrics;
    },
  };
}

function indexOfIds(ids: readonly number[], part: readonly number[], from: number): number {
  for (let i = from; i + part.length <= ids.length; i++) if (part.every((t, j) => ids[i + j] === t)) return i;
  return -1;
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= ids.length && prefix.every((t, i) => ids[i] === t);
}
