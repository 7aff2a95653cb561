// The token-id prompt of a program's next call: its previous context (the last call's prompt ids
// followed by the output ids exactly as the engine produced them) extended by the token ids of what
// the new request adds, so earlier turns are never re-tokenized from text. What the request adds
// is found by rendering with the engine's own template and tokenizer: when the full render starts
// with the previous context's ids it continues it as it is (one render); otherwise it is diffed
// against a second render, of the conversation up to the previous answer.
// A continuation is taken only when it is exactly what the template makes of the whole
// conversation: the previous prompt and answer must re-render to the engine's ids (or, where the
// engine's tokens of the answer differ from a re-tokenization, to the same text). Otherwise the
// request is tokenized whole (a context reset) and the reason is recorded: the client changed
// history, the tools changed, the answer sent back is not the engine's, the template renders earlier
// turns differently once more follow (Qwen3 drops earlier reasoning), or a cut-off answer's turn
// ending is unknown. A forced tool call's opening (the backend's parser's prefill) ends the prompt,
// tokenized by the engine with special tokens read as such, the same way for every engine.
// A request that continues its final message (an assistant "prefill", vLLM's continue_final_message)
// is rendered with that turn left open; its call's context holds the messages before the prefill and
// the prefill followed by the continuation as the answer turn, which is how a client sends it back.
import type { TokenizeRequest, TokenizeResult } from "../../backends/backend.js";
import type { ChatMessage, FinishReason, MessageToolCall } from "../../core/types.js";
import type { Endpoint } from "../openai-request.js";

/** What the gateway keeps of a program's latest recorded call. */
export interface ProgramContext {
  endpoint: Endpoint;
  /**
   * The request's messages (completions with a text prompt: one user message holding it); a call that
   * continued its final message keeps the messages before it (the prefill is the answer turn's start).
   */
  messages: ChatMessage[];
  promptTokenIds: number[];
  outputTokenIds: number[];
  /** The answer text the client got (stop token not included), after the prefill of a continued final message. */
  outputText: string;
  finishReason: FinishReason;
  /** The chat request's tool definitions (rendered into the prompt by some templates). */
  tools?: unknown[];
  /**
   * The answer as the client got it, tool calls and reasoning read out (token path); absent: the
   * client got `outputText` as its content, with any tool calls unknown to the gateway.
   */
  answer?: { content: string; toolCalls: MessageToolCall[]; reasoning?: string };
  /**
   * The call's prompt needed the render up to its previous answer (the engine's ids differed from a
   * re-render): the next call asks for both renders at once rather than one after the other.
   */
  answerRenderNeeded?: boolean;
}

/** The new request, as the prompt builder needs it. */
export type PromptSource =
  /**
   * `prefill`: a forced tool call's opening in the backend's format, which ends the prompt.
   * `continueFinal`: the final (assistant) message is left open and continued (no generation prompt).
   */
  | { endpoint: "chat"; messages: ChatMessage[]; tools?: unknown[]; prefill?: string; continueFinal?: true }
  | { endpoint: "completions"; prompt: string | number[] };

export interface BuiltPrompt {
  promptTokenIds: number[];
  /** There was a previous context and this prompt does not continue it. */
  contextReset: boolean;
  /** Why it does not (with `contextReset` only). */
  contextResetReason?: string;
  /** The engine's context length, when a tokenize answer reported it. */
  maxModelLen: number | null;
  /** Set when the render up to the previous answer was needed (the full render did not start with the context's ids). */
  answerRendered?: true;
}

/** Why a prompt does not continue the previous context (recorded on the call). */
export const RESET_REASONS = {
  history: "history differs",
  tools: "tools changed",
  answer: "answer differs from the engine's output",
  rerender: "template re-renders earlier turns",
  turnEnding: "cut-off answer's turn ending unknown",
  endpoint: "endpoint changed",
  prompt: "prompt does not extend the previous context",
} as const;

type Tokenize = (req: TokenizeRequest) => Promise<TokenizeResult>;
type Detokenize = (ids: number[], signal?: AbortSignal) => Promise<string>;

/** The engine's tokenizer endpoints the prompt builder uses. */
export interface PromptEngine {
  tokenize: Tokenize;
  /** Compares texts where the engine's answer ids differ from a re-render's (absent: ids must be equal). */
  detokenize?: Detokenize;
}

const reset = (whole: TokenizeResult, reason: string): BuiltPrompt => ({ promptTokenIds: whole.tokens, contextReset: true, contextResetReason: reason, maxModelLen: whole.maxModelLen });

/** Build the prompt ids of the next call of a program whose latest call was `prev` (if any). */
export async function buildPrompt(src: PromptSource, prev: ProgramContext | undefined, engine: PromptEngine | Tokenize, signal?: AbortSignal): Promise<BuiltPrompt> {
  const { tokenize, detokenize } = typeof engine === "function" ? { tokenize: engine, detokenize: undefined } : engine;
  if (src.endpoint === "completions") {
    if (typeof src.prompt !== "string") {
      if (prev === undefined || continues(src.prompt, prev)) return { promptTokenIds: src.prompt, contextReset: false, maxModelLen: null };
      return { promptTokenIds: src.prompt, contextReset: true, contextResetReason: RESET_REASONS.prompt, maxModelLen: null };
    }
    const before = prev?.endpoint === "completions" && prev.messages.length === 1 ? (prev.messages[0] as ChatMessage).content + prev.outputText : undefined;
    // An identical re-send is a new sample, not a continuation: the continuation must add text.
    if (prev && before !== undefined && src.prompt.length > before.length && src.prompt.startsWith(before)) {
      const delta = await tokenize({ text: src.prompt.slice(before.length), addSpecialTokens: false, signal });
      return { promptTokenIds: prev.promptTokenIds.concat(prev.outputTokenIds, delta.tokens), contextReset: false, maxModelLen: delta.maxModelLen };
    }
    const whole = await tokenize({ text: src.prompt, addSpecialTokens: true, signal });
    if (prev === undefined) return { promptTokenIds: whole.tokens, contextReset: false, maxModelLen: whole.maxModelLen };
    return reset(whole, prev.endpoint === "completions" ? RESET_REASONS.prompt : RESET_REASONS.endpoint);
  }

  const { messages, tools, prefill, continueFinal } = src;
  const chat = (m: ChatMessage[], addGenerationPrompt: boolean): TokenizeRequest => ({ messages: m, addGenerationPrompt, ...(tools?.length ? { tools } : {}), signal });
  // The final message's turn left open: the engine generates its continuation.
  const continuing = (m: ChatMessage[]): TokenizeRequest => ({ ...chat(m, false), continueFinalMessage: true });
  // Only the render this call generates from ends with a forced tool call's opening.
  const generating = async (): Promise<TokenizeResult> => {
    const [gen, open] = await Promise.all([
      tokenize(continueFinal ? continuing(messages) : chat(messages, true)),
      prefill !== undefined && prefill !== "" ? tokenize({ text: prefill, addSpecialTokens: false, parseSpecial: true, signal }) : undefined,
    ]);
    return open ? { tokens: [...gen.tokens, ...open.tokens], maxModelLen: gen.maxModelLen } : gen;
  };
  if (!prev) {
    const whole = await generating();
    return { promptTokenIds: whole.tokens, contextReset: false, maxModelLen: whole.maxModelLen };
  }
  if (prev.endpoint !== "chat") return reset(await generating(), RESET_REASONS.endpoint);
  if (!sameHistory(prev, messages)) return reset(await generating(), RESET_REASONS.history);
  // Tool definitions are part of the rendered prompt in most templates: with other tools the
  // context continues only if the template renders the earlier turns exactly as before.
  const toolsChanged = JSON.stringify(prev.tools ?? []) !== JSON.stringify(tools ?? []);
  const why = (reason: string): string => (toolsChanged ? RESET_REASONS.tools : reason);
  // Everything the new messages add is what the full render has beyond the render of the
  // conversation up to the previous answer; the previous answer itself stays as the engine's ids.
  const upToAnswer = messages.slice(0, prev.messages.length + 1);
  const renderUpToAnswer = (): Promise<TokenizeResult> => tokenize(chat(upToAnswer, false));
  // A program whose last prompt needed the render up to the answer likely needs it again: both at once.
  const early = prev.answerRenderNeeded === true ? renderUpToAnswer() : undefined;
  early?.catch(() => undefined);
  const full = await generating();
  // The full render already starts with the previous prompt and the engine's own answer ids (the
  // common case: the answer re-tokenizes to what the engine produced): it continues the context as
  // it is, and the render up to the answer (one more upstream round trip) would only confirm it.
  if (continues(full.tokens, prev)) return { promptTokenIds: full.tokens, contextReset: false, maxModelLen: full.maxModelLen };
  if (continueFinal && upToAnswer.length === messages.length) return continueAnswer(prev, messages, full, detokenize, signal, why);
  const before = await (early ?? renderUpToAnswer());
  const rendered = { answerRendered: true } as const;
  // A template that renders history differently once more turns follow: no continuation exists.
  if (!startsWith(full.tokens, before.tokens)) return { ...reset(full, why(RESET_REASONS.rerender)), ...rendered };
  // The previous prompt and answer re-render to exactly the engine's ids (the turn's ending, e.g.
  // ChatML's newline after <|im_end|>, may follow): the full render continues them as it is.
  if (continues(before.tokens, prev)) return { promptTokenIds: full.tokens, contextReset: false, maxModelLen: full.maxModelLen, ...rendered };
  // The engine's ids differ from the re-render. The answer the client sent back must be the one it
  // got; then the turn must re-render to the same text (the engine's tokens of it are kept).
  if (!extendsConversation(prev, messages)) return { ...reset(full, why(RESET_REASONS.answer)), ...rendered };
  const ending = await turnEnding(prev.messages, (m, gen) => tokenize(chat(m, gen)));
  let closing: number[];
  if (prev.finishReason === "stop") {
    // The engine's stop token ends the output: the template's turn ending follows from its second token.
    const stop = prev.outputTokenIds.at(-1);
    if (ending === undefined || ending[0] !== stop) return { ...reset(full, why(RESET_REASONS.rerender)), ...rendered };
    closing = ending.slice(1);
  } else {
    // The answer was cut off before its end-of-turn token: add the template's turn ending.
    if (ending === undefined) return { ...reset(full, why(RESET_REASONS.turnEnding)), ...rendered };
    closing = ending;
  }
  const continued = prev.promptTokenIds.concat(prev.outputTokenIds, closing);
  if (!(await sameText(continued, before.tokens, detokenize, signal))) return { ...reset(full, why(RESET_REASONS.rerender)), ...rendered };
  return { promptTokenIds: [...continued, ...full.tokens.slice(before.tokens.length)], contextReset: false, maxModelLen: full.maxModelLen, ...rendered };
}

/**
 * The prompt of a call that continues the previous answer's own turn (an answer cut off at max_tokens,
 * sent back as the prefill): the engine's ids stand where the client sent the answer it got and they
 * are the same text as the render; an answer that ended with its stop token has a closed turn, which
 * the open render is not.
 */
async function continueAnswer(
  prev: ProgramContext,
  messages: readonly ChatMessage[],
  full: TokenizeResult,
  detokenize: Detokenize | undefined,
  signal: AbortSignal | undefined,
  why: (reason: string) => string,
): Promise<BuiltPrompt> {
  if (prev.finishReason === "stop" || !extendsConversation(prev, messages)) return reset(full, why(RESET_REASONS.answer));
  const continued = prev.promptTokenIds.concat(prev.outputTokenIds);
  if (!(await sameText(continued, full.tokens, detokenize, signal))) return reset(full, why(RESET_REASONS.rerender));
  return { promptTokenIds: continued, contextReset: false, maxModelLen: full.maxModelLen };
}

/**
 * Whether two id sequences are the same text: equal ids, or (given a detokenizer) equal text after
 * their common prefix — the engine may have produced other tokens for the same text than a
 * re-tokenization makes, and those are the ones it computed with.
 */
async function sameText(a: readonly number[], b: readonly number[], detokenize: Detokenize | undefined, signal?: AbortSignal): Promise<boolean> {
  if (sameIds(a, b)) return true;
  if (!detokenize) return false;
  let p = 0;
  while (p < a.length && p < b.length && a[p] === b[p]) p++;
  const [x, y] = await Promise.all([detokenize(a.slice(p), signal), detokenize(b.slice(p), signal)]);
  return x === y;
}

/** Whether `messages` repeat the previous call's messages, then its answer as an assistant turn (reasoning too). */
export function extendsConversation(prev: ProgramContext, messages: readonly ChatMessage[]): boolean {
  if (!sameHistory(prev, messages)) return false;
  const sent = messages[prev.messages.length] as ChatMessage;
  // Recorded without a read-out answer (a streamed relay): the text the client got is the content.
  const got = prev.answer ?? { content: prev.outputText, toolCalls: [] };
  return sent.content === got.content && (sent.reasoning ?? "") === (got.reasoning ?? "") && sameCalls(sent.toolCalls ?? [], got.toolCalls, false);
}

/** The previous call's messages unchanged (tool calls, ids and reasoning too), then an assistant turn. */
function sameHistory(prev: ProgramContext, messages: readonly ChatMessage[]): boolean {
  const k = prev.messages.length;
  if (messages.length <= k || (messages[k] as ChatMessage).role !== "assistant") return false;
  for (let i = 0; i < k; i++) {
    const a = prev.messages[i] as ChatMessage;
    const b = messages[i] as ChatMessage;
    if (a.role !== b.role || a.content !== b.content || a.name !== b.name || a.toolCallId !== b.toolCallId || a.reasoning !== b.reasoning) return false;
    if (!sameCalls(a.toolCalls ?? [], b.toolCalls ?? [], true)) return false;
  }
  return true;
}

/**
 * Same calls in the same order. The calls of an answer the client sends back are compared by name
 * and arguments (as JSON values: SDKs re-serialize them; ids are the client's own bookkeeping);
 * calls in earlier turns must be exactly as sent before.
 */
function sameCalls(a: readonly MessageToolCall[], b: readonly MessageToolCall[], exact: boolean): boolean {
  if (a.length !== b.length) return false;
  return a.every((x, i) => {
    const y = b[i] as MessageToolCall;
    if (x.name !== y.name) return false;
    if (exact) return x.id === y.id && x.arguments === y.arguments;
    return x.arguments === y.arguments || canonicalJson(x.arguments) === canonicalJson(y.arguments);
  });
}

function canonicalJson(text: string): string | undefined {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return undefined;
  }
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && startsWith(a, b);
}

/** The tokens the template puts after an assistant turn's content (e.g. `<|end|>`, `<|im_end|>\n`), if it can tell. */
async function turnEnding(history: ChatMessage[], render: (m: ChatMessage[], addGenerationPrompt: boolean) => Promise<TokenizeResult>): Promise<number[] | undefined> {
  const [open, closed] = await Promise.all([render(history, true), render([...history, { role: "assistant", content: "" }], false)]);
  return startsWith(closed.tokens, open.tokens) ? closed.tokens.slice(open.tokens.length) : undefined;
}

function startsWith(ids: readonly number[], prefix: readonly number[], from = 0): boolean {
  if (from + prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[from + i] !== prefix[i]) return false;
  return true;
}

/** Whether `ids` start with the previous context (its prompt, then its output), compared in place rather than concatenated: a long context is not copied per call. */
function continues(ids: readonly number[], prev: ProgramContext): boolean {
  return startsWith(ids, prev.promptTokenIds) && startsWith(ids, prev.outputTokenIds, prev.promptTokenIds.length);
}
