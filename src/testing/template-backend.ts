// An in-memory TokenBackend for the gateway's token-path tests: a chat model's format (a Jinja chat
// template rendered with @huggingface/jinja over a small tokenizer, or Arbor's own template and
// vocabulary) behind tokenize/detokenize, and a scripted engine whose every answer is exactly the
// format's rendering of an assistant turn the test chooses, cut after the turn's stop token. The
// tokenizer is deliberately simple (control and added tokens matched greedily, one id per other
// character), so the only way a prompt can differ from the template's render is the gateway's own
// doing. Test support only.
import { Template } from "@huggingface/jinja";
import type {
  BackendMetrics,
  GenerateRequest,
  GenerateResult,
  GenerateStream,
  ReasoningParser,
  TokenBackend,
  TokenDelta,
  TokenizeRequest,
  TokenizeResult,
} from "../backends/backend.js";
import type { ChatMessage } from "../core/types.js";
import { renderChatPrompt } from "../engine/openai-tools.js";
import { toolCallsAsMarkup, type ToolFields } from "../model/tool-markup.js";
import type { ToolCallParser } from "../model/tool-parsers/tool-parser.js";
import { CONTROL_TOKENS, Vocab } from "../model/vocab.js";

/** A model's chat format and tokenizer, as its engine's /tokenize and /detokenize use them. */
export interface ChatModel {
  readonly name: string;
  /** Prompt ids of a conversation (tools in OpenAI's shape), as the engine's chat template renders it. */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean, tools?: readonly unknown[]): number[];
  /** Ids of a text; with `parseSpecial` the text of special tokens becomes their ids. */
  encode(text: string, parseSpecial: boolean): number[];
  /** Text of ids as /detokenize gives it (control tokens as nothing for Jinja models). */
  decode(ids: readonly number[]): string;
  /** Ids that end an assistant turn. */
  readonly stopIds: readonly number[];
}

const CHAR_BASE = 1000;

/** A Jinja-templated model over a tokenizer of `control` tokens (rendered as nothing), `added` tokens and one id per character. */
export function jinjaChatModel(name: string, source: string, control: readonly string[], added: readonly string[], stop: readonly string[]): ChatModel {
  const template = new Template(source);
  const specials = [...control, ...added];
  const idOf = new Map(specials.map((s, i) => [s, i + 1]));
  // Longest first, so a token that is a prefix of another never wins over it.
  const byLength = [...specials].sort((a, b) => b.length - a.length);
  const encode = (text: string, parseSpecial: boolean): number[] => {
    const ids: number[] = [];
    let i = 0;
    outer: while (i < text.length) {
      if (parseSpecial) {
        for (const s of byLength) {
          if (text.startsWith(s, i)) {
            ids.push(idOf.get(s) as number);
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
  };
  const decode = (ids: readonly number[]): string =>
    ids.map((id) => (id >= CHAR_BASE ? String.fromCodePoint(id - CHAR_BASE) : id > control.length ? (specials[id - 1] as string) : "")).join("");
  return {
    name,
    render(messages, addGenerationPrompt, tools) {
      const text = template.render({
        messages: messages.map(hfMessage),
        ...(tools && tools.length > 0 ? { tools } : {}),
        add_generation_prompt: addGenerationPrompt,
        bos_token: "",
        eos_token: "<|endoftext|>",
      });
      return encode(text, true);
    },
    encode,
    decode,
    stopIds: stop.map((s) => idOf.get(s) as number),
  };
}

/** A message as Hugging Face's apply_chat_template passes it (tool call arguments as JSON values). */
function hfMessage(m: ChatMessage): Record<string, unknown> {
  const calls = m.toolCalls ?? [];
  return {
    role: m.role,
    content: m.content,
    ...(m.name !== undefined ? { name: m.name } : {}),
    ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: jsonValue(c.arguments) } })) } : {}),
    ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
    ...(m.reasoning !== undefined ? { reasoning_content: m.reasoning } : {}),
  };
}

function jsonValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Arbor's tiny policy's format: its template (tools as a system turn, calls as markup) and vocabulary. */
export function arborChatModel(): ChatModel {
  const vocab = new Vocab();
  const encode = (text: string, parseSpecial: boolean): number[] => (parseSpecial ? encodeParsingControl(vocab, text) : vocab.encode(text));
  return {
    name: "arbor",
    render(messages, addGenerationPrompt, tools) {
      // As the engine renders a request: earlier calls as markup in the assistant's content.
      const marked = messages.map((m) => (m.role === "assistant" && m.toolCalls?.length ? { role: m.role, content: toolCallsAsMarkup(m.content, m.toolCalls.map((c) => ({ function: c }))) } : m));
      const body: ToolFields = tools && tools.length > 0 ? { tools: tools as NonNullable<ToolFields["tools"]> } : {};
      return renderChatPrompt(marked, body, (t) => vocab.encode(t), vocab, addGenerationPrompt).prompt;
    },
    encode,
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
      if ("messages" in req) return { tokens: model.render(req.messages, req.addGenerationPrompt, req.tools), maxModelLen: 1_000_000 };
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
