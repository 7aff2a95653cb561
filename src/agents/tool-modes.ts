// The two ways a model asks for tools: native OpenAI tool calling (`tools` in the request,
// `tool_calls` in the answer) for capable models, and Arbor's text markup for the tiny policy.
import type { ChatCompletionMessage, ChatCompletionTool } from "openai/resources/chat/completions";
import type { AgentMessage } from "./agent-message.js";
import { toolParameters, type AgentTool } from "./agent-tool.js";
import type { ChatToolSpec } from "../model/chat-template.js";
import { parseToolCalls } from "../model/markup.js";

export type ToolCallMode = "native" | "markup";
export const TOOL_CALL_MODES: readonly ToolCallMode[] = ["native", "markup"];

/** One tool call the model asked for. */
export interface RequestedCall {
  id: string;
  name: string;
  /** JSON arguments (native) or the markup's argument text. */
  input: string;
}

export interface ParsedAnswer {
  /** The assistant turn as it goes back into the conversation. */
  assistant: AgentMessage;
  /** The answer's text without tool calls. */
  text: string;
  calls: RequestedCall[];
  /** Markup calls that could not be read (unclosed, nameless). */
  malformed: string[];
}

/** The tools as a native request declares them, as the chat template sees them (SFT renders with these). */
export function declaredToolSpecs(tools: readonly AgentTool[]): ChatToolSpec[] {
  return tools.map((t) => ({ name: t.name, description: t.description, parameters: toolParameters(t).parameters }));
}

/** The `tools` field of a native request. */
export function nativeToolSpecs(tools: readonly AgentTool[]): ChatCompletionTool[] {
  return declaredToolSpecs(tools).map((f) => ({ type: "function", function: f }));
}

/** Read one answer in `mode`. `callIndex` makes markup call ids unique within the program. */
export function parseAnswer(mode: ToolCallMode, message: Pick<ChatCompletionMessage, "content" | "tool_calls">, callIndex: number): ParsedAnswer {
  const content = message.content ?? "";
  if (mode === "native") {
    const calls: RequestedCall[] = [];
    for (const c of message.tool_calls ?? []) {
      if (c.type === "function") calls.push({ id: c.id, name: c.function.name, input: c.function.arguments });
    }
    const assistant: AgentMessage = { role: "assistant", content };
    if (calls.length > 0) assistant.toolCalls = calls.map((c) => ({ id: c.id, name: c.name, arguments: c.input }));
    return { assistant, text: content.trim(), calls, malformed: [] };
  }
  const parsed = parseToolCalls(content);
  return {
    assistant: { role: "assistant", content },
    text: parsed.rest,
    calls: parsed.calls.map((c, i) => ({ id: `call_${callIndex}_${i}`, name: c.name, input: c.input })),
    malformed: parsed.malformed,
  };
}
