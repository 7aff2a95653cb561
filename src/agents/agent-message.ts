// The agent's own view of a conversation: chat messages plus what native tool calling needs
// (the calls an assistant turn made, the call a tool result answers), and its OpenAI wire form.
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { ChatMessage } from "../core/types.js";

export interface AgentToolCall {
  id: string;
  name: string;
  /** The arguments exactly as the model wrote them (JSON text for native calls). */
  arguments: string;
}

export interface AgentMessage extends ChatMessage {
  /** Native tool calls of an assistant turn. */
  toolCalls?: AgentToolCall[];
  /** For tool messages: the id of the call this result answers. */
  toolCallId?: string;
}

/** The OpenAI chat form of a conversation. */
export function toOpenAiMessages(messages: readonly AgentMessage[]): ChatCompletionMessageParam[] {
  return messages.map((m, i): ChatCompletionMessageParam => {
    if (m.role === "tool") return { role: "tool", content: m.content, tool_call_id: m.toolCallId ?? `call_${i}` };
    if (m.role === "assistant" && m.toolCalls && m.toolCalls.length > 0) {
      return {
        role: "assistant",
        content: m.content === "" ? null : m.content,
        tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })),
      };
    }
    return { role: m.role, content: m.content };
  });
}

/** Plain chat messages (tool-call details dropped), e.g. for reports and checkers. */
export function toChatMessages(messages: readonly AgentMessage[]): ChatMessage[] {
  return messages.map((m) => (m.name === undefined ? { role: m.role, content: m.content } : { role: m.role, content: m.content, name: m.name }));
}

/** Characters of a message as the model sees them (content plus native call arguments). */
export function messageChars(m: AgentMessage): number {
  let n = m.content.length;
  for (const c of m.toolCalls ?? []) n += c.name.length + c.arguments.length;
  return n;
}
