// The token-id prompt of a program's next call: its previous context (the last call's prompt ids
// followed by the output ids exactly as the engine produced them) extended by the token ids of what
// the new request adds, so earlier turns are never re-tokenized from text. What the request adds
// is found by rendering with the engine's own template and tokenizer and diffing two renders; a
// request that does not extend the previous conversation is tokenized whole (a context reset).
// An agent's tool loop extends it too: the assistant turn sent back (content + tool_calls) must be
// the answer the client got, or re-render to exactly the engine's output ids.
import type { TokenizeRequest, TokenizeResult } from "../../backends/backend.js";
import type { ChatMessage, FinishReason, MessageToolCall } from "../../core/types.js";
import type { Endpoint } from "../openai-request.js";

/** What the gateway keeps of a program's latest recorded call. */
export interface ProgramContext {
  endpoint: Endpoint;
  /** The request's messages (completions with a text prompt: one user message holding it). */
  messages: ChatMessage[];
  promptTokenIds: number[];
  outputTokenIds: number[];
  /** The answer text the client got (stop token not included). */
  outputText: string;
  finishReason: FinishReason;
  /** The chat request's tool definitions (rendered into the prompt by some templates). */
  tools?: unknown[];
  /**
   * The answer as the client got it, tool calls read out (token path); absent: the client got
   * `outputText` as its content, with any tool calls unknown to the gateway.
   */
  answer?: { content: string; toolCalls: MessageToolCall[] };
}

/** The new request, as the prompt builder needs it. */
export type PromptSource =
  /** `toolChoice`: the request's tool_choice (a forced call's opening ends the prompt). */
  | { endpoint: "chat"; messages: ChatMessage[]; tools?: unknown[]; toolChoice?: unknown }
  | { endpoint: "completions"; prompt: string | number[] };

export interface BuiltPrompt {
  promptTokenIds: number[];
  /** There was a previous context and this prompt does not continue it. */
  contextReset: boolean;
  /** The engine's context length, when a tokenize answer reported it. */
  maxModelLen: number | null;
}

type Tokenize = (req: TokenizeRequest) => Promise<TokenizeResult>;

/** Build the prompt ids of the next call of a program whose latest call was `prev` (if any). */
export async function buildPrompt(src: PromptSource, prev: ProgramContext | undefined, tokenize: Tokenize, signal?: AbortSignal): Promise<BuiltPrompt> {
  const context = prev ? [...prev.promptTokenIds, ...prev.outputTokenIds] : [];
  if (src.endpoint === "completions") {
    if (typeof src.prompt !== "string") {
      return { promptTokenIds: src.prompt, contextReset: prev !== undefined && !startsWith(src.prompt, context), maxModelLen: null };
    }
    const before = prev?.endpoint === "completions" && prev.messages.length === 1 ? (prev.messages[0] as ChatMessage).content + prev.outputText : undefined;
    // An identical re-send is a new sample, not a continuation: the continuation must add text.
    if (prev && before !== undefined && src.prompt.length > before.length && src.prompt.startsWith(before)) {
      const delta = await tokenize({ text: src.prompt.slice(before.length), addSpecialTokens: false, signal });
      return { promptTokenIds: [...context, ...delta.tokens], contextReset: false, maxModelLen: delta.maxModelLen };
    }
    const whole = await tokenize({ text: src.prompt, addSpecialTokens: true, signal });
    return { promptTokenIds: whole.tokens, contextReset: prev !== undefined, maxModelLen: whole.maxModelLen };
  }

  const { messages, tools, toolChoice } = src;
  const chat = (m: ChatMessage[], addGenerationPrompt: boolean): TokenizeRequest => ({ messages: m, addGenerationPrompt, ...(tools?.length ? { tools } : {}), signal });
  // Only the render this call generates from ends with a forced tool call's opening.
  const generating = (m: ChatMessage[]): TokenizeRequest => ({ ...chat(m, true), ...(tools?.length && toolChoice != null ? { toolChoice } : {}) });
  // Tool definitions are part of the rendered prompt: other tools, another prompt.
  if (!prev || prev.endpoint !== "chat" || !sameHistory(prev, messages) || JSON.stringify(prev.tools ?? []) !== JSON.stringify(tools ?? [])) {
    const whole = await tokenize(generating(messages));
    return { promptTokenIds: whole.tokens, contextReset: prev !== undefined, maxModelLen: whole.maxModelLen };
  }
  // Everything the new messages add is what the full render has beyond the render of the
  // conversation up to the previous answer; the previous answer itself stays as the engine's ids.
  const upToAnswer = messages.slice(0, prev.messages.length + 1);
  const [full, before] = await Promise.all([tokenize(generating(messages)), tokenize(chat(upToAnswer, false))]);
  // An answer the gateway cannot compare (tool calls it did not read out) continues the context
  // only when it re-renders to exactly the engine's ids, turn ending included.
  const sameAnswer = extendsConversation(prev, messages) || (prev.finishReason === "stop" && sameIds(before.tokens, [...prev.promptTokenIds, ...prev.outputTokenIds]));
  if (!sameAnswer || !startsWith(full.tokens, before.tokens)) {
    // Another answer than the engine's, or a template that renders history differently once more
    // turns follow: no exact continuation exists.
    return { promptTokenIds: full.tokens, contextReset: true, maxModelLen: full.maxModelLen };
  }
  let closing: number[] = [];
  if (prev.finishReason !== "stop") {
    // The answer was cut off before its end-of-turn token: add the template's turn ending.
    const ending = await turnEnding(prev.messages, (m, gen) => tokenize(chat(m, gen)));
    if (ending === undefined) return { promptTokenIds: full.tokens, contextReset: true, maxModelLen: full.maxModelLen };
    closing = ending;
  }
  return { promptTokenIds: [...context, ...closing, ...full.tokens.slice(before.tokens.length)], contextReset: false, maxModelLen: full.maxModelLen };
}

/** Whether `messages` repeat the previous call's messages, then its answer as an assistant turn. */
export function extendsConversation(prev: ProgramContext, messages: readonly ChatMessage[]): boolean {
  if (!sameHistory(prev, messages)) return false;
  const sent = messages[prev.messages.length] as ChatMessage;
  // Recorded without a read-out answer (a streamed relay): the text the client got is the content.
  const got = prev.answer ?? { content: prev.outputText, toolCalls: [] };
  return sent.content === got.content && sameCalls(sent.toolCalls ?? [], got.toolCalls, false);
}

/** The previous call's messages unchanged (tool calls and ids too), then an assistant turn. */
function sameHistory(prev: ProgramContext, messages: readonly ChatMessage[]): boolean {
  const k = prev.messages.length;
  if (messages.length <= k || (messages[k] as ChatMessage).role !== "assistant") return false;
  for (let i = 0; i < k; i++) {
    const a = prev.messages[i] as ChatMessage;
    const b = messages[i] as ChatMessage;
    if (a.role !== b.role || a.content !== b.content || a.name !== b.name || a.toolCallId !== b.toolCallId) return false;
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

/** The tokens the template puts after an assistant turn's content (e.g. `<|end|>`), if it can tell. */
async function turnEnding(history: ChatMessage[], render: (m: ChatMessage[], addGenerationPrompt: boolean) => Promise<TokenizeResult>): Promise<number[] | undefined> {
  const [open, closed] = await Promise.all([render(history, true), render([...history, { role: "assistant", content: "" }], false)]);
  return startsWith(closed.tokens, open.tokens) ? closed.tokens.slice(open.tokens.length) : undefined;
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= ids.length && prefix.every((t, i) => ids[i] === t);
}
