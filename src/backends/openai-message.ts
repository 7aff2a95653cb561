// A chat message in OpenAI's request shape, as engines' tokenize and template endpoints take it
// (vLLM's /tokenize, llama-server's /apply-template): tool calls, the id a tool result answers, and
// an assistant turn's reasoning as `reasoning_content`, the field templates that re-render reasoning
// read (Qwen3's, DeepSeek's).
import type { ChatMessage } from "../core/types.js";

/** `m` in OpenAI's request shape (an assistant turn that only made calls has null content). */
export function openAiMessage(m: ChatMessage): Record<string, unknown> {
  const calls = m.toolCalls ?? [];
  return {
    role: m.role,
    content: calls.length > 0 && m.content === "" ? null : m.content,
    ...(m.name !== undefined ? { name: m.name } : {}),
    ...(calls.length > 0
      ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })) }
      : {}),
    ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
    ...(m.reasoning !== undefined ? { reasoning_content: m.reasoning } : {}),
  };
}
