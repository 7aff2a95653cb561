// Explicit bounds on what one request may ask of the engine, checked before anything recursive or
// spreading touches it: a body's nesting and array sizes (the fastify hook), the number of tools,
// and the prompt's characters against the context. Without them a 10 MB message or 5,000 tools
// overflowed the stack while rendering and came back as 400 "Maximum call stack size exceeded".
import type { FastifyInstance } from "fastify";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../../model/markup.js";
import type { ChatMessage } from "../../core/types.js";
import { jsonShapeViolation } from "../../core/json-limits.js";
import { invalidRequest } from "../openai-errors.js";

/** Most tools one request may declare (OpenAI's own limit). */
export const MAX_TOOLS = 128;

/** A declared tool, as far as its rendered text goes. */
interface ToolText {
  function: { name: string; description?: string | null; parameters?: unknown };
}

/** Refuse (400, naming the field) request bodies nested too deep, with oversized arrays or too many tools. */
export function registerRequestLimits(app: FastifyInstance): void {
  app.addHook("preValidation", async (req) => {
    const body = req.body;
    if (typeof body !== "object" || body === null) return;
    const violation = jsonShapeViolation(body);
    if (violation) throw invalidRequest(violation.param, violation.reason);
    const tools = (body as { tools?: unknown }).tools;
    if (Array.isArray(tools) && tools.length > MAX_TOOLS) {
      throw invalidRequest("tools", `${tools.length} tools given; at most ${MAX_TOOLS} are supported (OpenAI's limit)`);
    }
  });
}

/**
 * Refuse a chat prompt that cannot fit the context before it is rendered. No token of the served
 * model covers more than `maxTokenChars` characters (1 for Arbor's vocabulary, whose tool-call
 * markers in assistant messages are one token each), so a text of n characters is at least
 * n / maxTokenChars tokens.
 */
export function checkChatPromptFits(messages: readonly ChatMessage[], tools: readonly ToolText[] | null | undefined, contextSize: number, maxTokenChars = 1): void {
  const atLeast = (chars: number): number => Math.ceil(chars / maxTokenChars);
  let total = 0;
  for (const [i, m] of messages.entries()) {
    let chars = m.role === "assistant" ? minAssistantTokens(m.content) : m.content.length;
    for (const c of m.toolCalls ?? []) chars += c.name.length + c.arguments.length;
    const n = atLeast(chars);
    if (n >= contextSize) throw tooLong(`messages[${i}].content`, `has at least ${n} tokens`, contextSize);
    total += n;
  }
  let toolTokens = 0;
  for (const t of tools ?? []) {
    const f = t.function;
    toolTokens += f.name.length + (f.description?.length ?? 0) + JSON.stringify(f.parameters ?? {}).length;
  }
  toolTokens = atLeast(toolTokens);
  if (toolTokens >= contextSize) throw tooLong("tools", `declare at least ${toolTokens} tokens of text`, contextSize);
  if (total + toolTokens >= contextSize) {
    throw tooLong("messages", `and tools come to at least ${total + toolTokens} tokens`, contextSize);
  }
}

/** Refuse a text completion prompt that cannot fit the context (see {@link checkChatPromptFits} for `maxTokenChars`). */
export function checkTextPromptFits(prompt: string, contextSize: number, maxTokenChars = 1): void {
  const n = Math.ceil(prompt.length / maxTokenChars);
  if (n >= contextSize) throw tooLong("prompt", `has at least ${n} tokens`, contextSize);
}

function minAssistantTokens(text: string): number {
  let n = text.length;
  for (const marker of [TOOL_CALL_OPEN, TOOL_CALL_CLOSE]) {
    for (let at = text.indexOf(marker); at >= 0; at = text.indexOf(marker, at + marker.length)) n -= marker.length - 1;
  }
  return n;
}

function tooLong(param: string, what: string, contextSize: number) {
  return invalidRequest(param, `${what}, over the context of ${contextSize} tokens (max_model_len)`, "context_length_exceeded");
}
