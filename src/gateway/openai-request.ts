// Turns a client's OpenAI request into the upstream request Arbor needs (token ids and logprobs
// always on, Arbor-only fields stripped) plus what the trace records about the prompt.
import type { ChatMessage, ChatRole, MaxTokensClamp, MessageToolCall } from "../core/types.js";
import { continueFinalRefusal } from "../model/continue-final.js";
import { InvalidRequestError } from "./http-errors.js";

export type Endpoint = "chat" | "completions";

export interface PreparedRequest {
  endpoint: Endpoint;
  upstreamBody: Record<string, unknown>;
  /** The prompt as messages (completions: one user message, or none for a token-id prompt). */
  messages: ChatMessage[];
  /** Whether the client itself asked for logprobs (otherwise they are removed from its answer). */
  clientWantsLogprobs: boolean;
  /** Whether the client itself sent `return_token_ids: true` (otherwise streamed chunks drop them). */
  clientWantsTokenIds: boolean;
  /** `stream: true`: the answer is relayed as server-sent events. */
  stream: boolean;
  /** `program_id` given in the body (ThunderAgent convention; also how `extra_body` arrives). */
  bodyProgramId?: string;
  /**
   * The `model` the client asked for, as sent (recorded on the call): the backend serves the call
   * as its own model whatever the client names (black-box agents name their vendor's).
   */
  requestedModel?: string;
  /**
   * The client's names of chat fields a surface translated (the Responses API's max_output_tokens,
   * Anthropic's stop_sequences), so errors and refusals name the field the client sent.
   */
  clientNames?: ClientFieldNames;
  /** Set on a passthrough call whose max_tokens was clamped to what the context leaves (passthrough-budget.ts). */
  maxTokensClamped?: MaxTokensClamp;
  /** The budget a black-box agent asked for before Arbor's proxy lowered it (admit-call.ts's MAX_TOKENS_ASKED_HEADER). */
  maxTokensAsked?: number;
  /**
   * vLLM's `continue_final_message` (chat): the final message is an assistant "prefill" the answer
   * continues. The answer holds only the continuation; the recorded prompt ids include the prefill.
   */
  continueFinalMessage?: true;
}

/** A surface's own names of the chat fields it translates into (absent: the chat name). */
export interface ClientFieldNames {
  max_tokens?: string;
  stop?: string;
  /** The client's name of the whole prompt (Responses: input; absent: messages). */
  messages?: string;
  /**
   * Per chat message (by index), the client's field it was translated from, e.g. `system`, `messages.0.content`,
   * `input` (absent: the client sent the chat messages themselves).
   */
  messageFields?: readonly string[];
}

/**
 * The body field holding a request's output budget: chat's `max_completion_tokens` where the client set it (OpenAI's
 * newer name, which wins over `max_tokens`), else `max_tokens`.
 */
export function budgetField(endpoint: Endpoint, body: Record<string, unknown>): "max_completion_tokens" | "max_tokens" {
  return endpoint === "chat" && body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? "max_completion_tokens" : "max_tokens";
}

const ROLES = new Set<string>(["system", "user", "assistant", "tool"]);

/** Validate a request body and derive the upstream body. Throws {@link InvalidRequestError}. */
export function prepareRequest(endpoint: Endpoint, raw: unknown): PreparedRequest {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new InvalidRequestError(null, "request body must be a JSON object");
  }
  const body = raw as Record<string, unknown>;
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") {
    throw new InvalidRequestError("stream", "must be a boolean");
  }
  const stream = body.stream === true;
  const clientWantsTokenIds = body.return_token_ids === true;
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw new InvalidRequestError("n", "only n=1 is supported; send one call per sample (one program each)");
  }
  if (body.model !== undefined && body.model !== null && (typeof body.model !== "string" || body.model === "" || body.model.length > 256)) {
    throw new InvalidRequestError("model", "must be a string of 1-256 characters");
  }
  const requestedModel = typeof body.model === "string" ? { requestedModel: body.model } : {};
  let bodyProgramId: string | undefined;
  if (body.program_id !== undefined && body.program_id !== null) {
    if (typeof body.program_id !== "string") throw new InvalidRequestError("program_id", "must be a string");
    bodyProgramId = body.program_id;
  }
  const upstreamBody: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    if (k === "program_id" || k.startsWith("arbor_")) continue;
    upstreamBody[k] = v;
  }
  upstreamBody.return_token_ids = true;

  if (endpoint === "chat") {
    const messages = parseMessages(body.messages);
    if (body.logprobs !== undefined && body.logprobs !== null && typeof body.logprobs !== "boolean") {
      throw new InvalidRequestError("logprobs", "must be a boolean for chat completions");
    }
    // Arbor needs the behaviour policy's logprob of every output token, asked for or not.
    upstreamBody.logprobs = true;
    const continued = continuesFinalMessage(body, messages) ? { continueFinalMessage: true as const } : {};
    return { endpoint, upstreamBody, messages, clientWantsLogprobs: body.logprobs === true, clientWantsTokenIds, stream, bodyProgramId, ...requestedModel, ...continued };
  }

  if (body.echo === true) {
    throw new InvalidRequestError("echo", "not supported (the trace would mix prompt and output tokens)");
  }
  if (body.best_of !== undefined && body.best_of !== null && body.best_of !== 1) {
    throw new InvalidRequestError("best_of", "only best_of=1 is supported");
  }
  let clientWantsLogprobs = false;
  if (body.logprobs === undefined || body.logprobs === null || body.logprobs === false) {
    upstreamBody.logprobs = 0;
  } else if (Number.isInteger(body.logprobs) && (body.logprobs as number) >= 0) {
    clientWantsLogprobs = true;
  } else {
    throw new InvalidRequestError("logprobs", "must be an integer >= 0 for completions");
  }
  return { endpoint, upstreamBody, messages: promptMessages(body.prompt), clientWantsLogprobs, clientWantsTokenIds, stream, bodyProgramId, ...requestedModel };
}

/** The final message a chat request continues (its assistant prefill), if it does. */
export function prefillOf(prepared: Pick<PreparedRequest, "continueFinalMessage" | "messages">): ChatMessage | undefined {
  return prepared.continueFinalMessage ? prepared.messages.at(-1) : undefined;
}

/**
 * Whether a chat request continues its final message (vLLM's `continue_final_message`), checked as the
 * engines check it on every path: refused (400 naming the field) with `add_generation_prompt` true (vLLM's
 * check_generation_prompt), after a message that is not the assistant's or one that makes tool calls, and
 * with a forced tool call (whose opening follows a generation prompt).
 */
function continuesFinalMessage(body: Record<string, unknown>, messages: readonly ChatMessage[]): boolean {
  const { continue_final_message: continued, add_generation_prompt: generation } = body;
  if (generation !== undefined && generation !== null && typeof generation !== "boolean") throw new InvalidRequestError("add_generation_prompt", "must be a boolean");
  if (continued === undefined || continued === null || continued === false) return false;
  if (continued !== true) throw new InvalidRequestError("continue_final_message", "must be a boolean");
  const refused = continueFinalRefusal(generation, body.tool_choice, messages);
  if (refused !== undefined) throw new InvalidRequestError("continue_final_message", refused);
  return true;
}

function parseMessages(raw: unknown): ChatMessage[] {
  if (!Array.isArray(raw) || raw.length === 0) throw new InvalidRequestError("messages", "must be a non-empty list");
  return raw.map((m, i): ChatMessage => {
    const where = `messages[${i}]`;
    if (typeof m !== "object" || m === null) throw new InvalidRequestError(where, "must be an object");
    const { role, content, name, tool_calls: toolCalls, tool_call_id: toolCallId, reasoning_content: reasoningContent, reasoning } = m as Record<string, unknown>;
    if (typeof role !== "string") throw new InvalidRequestError(`${where}.role`, "must be a string");
    // OpenAI's newer "developer" role plays the system role.
    const mapped = role === "developer" ? "system" : role;
    if (!ROLES.has(mapped)) {
      throw new InvalidRequestError(`${where}.role`, `unknown role '${role}' (known: system, developer, user, assistant, tool)`);
    }
    const msg: ChatMessage = { role: mapped as ChatRole, content: contentText(content, `${where}.content`, mapped === "assistant") };
    if (typeof name === "string") msg.name = name;
    // Kept so that the next call can tell that the conversation continues (token path) and the
    // trace holds what the agent sent.
    if (toolCalls !== undefined && toolCalls !== null) {
      if (mapped !== "assistant") throw new InvalidRequestError(`${where}.tool_calls`, "only assistant messages make tool calls");
      const calls = parseToolCalls(toolCalls, `${where}.tool_calls`, i);
      if (calls.length > 0) msg.toolCalls = calls;
    }
    if (toolCallId !== undefined && toolCallId !== null) {
      if (typeof toolCallId !== "string") throw new InvalidRequestError(`${where}.tool_call_id`, "must be a string");
      msg.toolCallId = toolCallId;
    }
    // The reasoning an answer came with (vLLM's `reasoning_content`, its newer name `reasoning`), sent
    // back so templates that re-render reasoning see it and the token path can tell the answer is the same.
    const thought = reasoningContent ?? reasoning;
    if (thought !== undefined && thought !== null) {
      const field = reasoningContent != null ? "reasoning_content" : "reasoning";
      if (typeof thought !== "string") throw new InvalidRequestError(`${where}.${field}`, "must be a string");
      if (mapped !== "assistant") throw new InvalidRequestError(`${where}.${field}`, "only assistant messages carry reasoning");
      msg.reasoning = thought;
    }
    return msg;
  });
}

/** A call sent without an id (OpenAI requires one; some clients omit it) gets `call_<message>_<n>`. */
function parseToolCalls(raw: unknown, where: string, message: number): MessageToolCall[] {
  if (!Array.isArray(raw)) throw new InvalidRequestError(where, "must be a list of tool calls");
  return raw.map((c, j): MessageToolCall => {
    const at = `${where}[${j}]`;
    if (typeof c !== "object" || c === null) throw new InvalidRequestError(at, "must be an object");
    const { id, type, function: fn } = c as Record<string, unknown>;
    if (type !== undefined && type !== null && type !== "function") throw new InvalidRequestError(`${at}.type`, "only function tool calls are supported");
    if (id !== undefined && id !== null && typeof id !== "string") throw new InvalidRequestError(`${at}.id`, "must be a string");
    const f = fn as Record<string, unknown> | null | undefined;
    if (typeof f !== "object" || f === null) throw new InvalidRequestError(`${at}.function`, "must be an object with name and arguments");
    if (typeof f.name !== "string" || f.name === "") throw new InvalidRequestError(`${at}.function.name`, "must be a non-empty string");
    if (typeof f.arguments !== "string") throw new InvalidRequestError(`${at}.function.arguments`, "must be a string (JSON text)");
    return { id: typeof id === "string" ? id : `call_${message}_${j}`, name: f.name, arguments: f.arguments };
  });
}

function contentText(content: unknown, where: string, assistant: boolean): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) {
    // An assistant turn that only made tool calls (or, from the Messages surface, only thought) has null content;
    // OpenAI, vLLM and the engine refuse any other turn without it (it would be rendered as an empty turn).
    if (assistant) return "";
    throw new InvalidRequestError(where, "must be a string or a list of text parts (only an assistant message may leave it out)");
  }
  if (Array.isArray(content)) {
    return content
      .map((part, j) => {
        const p = part as Record<string, unknown> | null;
        if (p && p.type === "text" && typeof p.text === "string") return p.text;
        throw new InvalidRequestError(`${where}[${j}]`, "only text parts are supported");
      })
      .join("");
  }
  throw new InvalidRequestError(where, "must be a string or a list of text parts");
}

function promptMessages(prompt: unknown): ChatMessage[] {
  let p = prompt;
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === "string" || Array.isArray(p[0]))) p = p[0];
  if (typeof p === "string") return [{ role: "user", content: p }];
  if (Array.isArray(p) && p.length > 0 && p.every((t) => Number.isInteger(t) && t >= 0)) return [];
  if (Array.isArray(p) && p.length > 1 && p.every((x) => typeof x === "string" || Array.isArray(x))) {
    throw new InvalidRequestError("prompt", "batched prompts are not supported; send one call per prompt");
  }
  throw new InvalidRequestError("prompt", "must be a string or a non-empty list of token ids");
}
