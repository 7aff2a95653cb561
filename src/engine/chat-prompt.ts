// A chat request's prompt ids, exactly as /v1/chat/completions feeds the model and /tokenize reports
// them: the messages rendered with the served model's chat template (Arbor's or the model's Jinja
// template), declared tools as the template writes them, and with a generation prompt the opening
// of a forced tool call (tool_choice "required" or a named function) tokenized with special tokens
// recognised, which the answer continues.
import type { ChatMessage } from "../core/types.js";
import type { ToolFields } from "../model/tool-markup.js";
import { toolPlan, type ChatPrompt } from "./openai-tools.js";
import type { ServedModel } from "./served-model.js";

/** The model-family parsers a chat request is read with (engine options; registry names). */
export interface ChatParsers {
  /** Tool-call parser name (e.g. "hermes"); absent: Arbor's markup. */
  toolParser?: string;
  /** Reasoning parser name (e.g. "think"); absent: none. */
  reasoningParser?: string;
}

/** Render a chat request for `served`; see the file header. */
export function renderChatPrompt(
  messages: readonly ChatMessage[],
  body: ToolFields,
  served: ServedModel,
  addGenerationPrompt: boolean,
  parsers: ChatParsers = {},
): ChatPrompt {
  const tools = toolPlan(body, parsers);
  const prompt = served.chat.render(messages, { addGenerationPrompt, ...(tools ? { tools: tools.specs } : {}) });
  if (addGenerationPrompt && tools?.prefill !== undefined) {
    // Special tokens on: a format's call opening (`<|tool_call|>`, `<tool_call>`, `[TOOL_CALLS]`) is one token.
    prompt.push(...served.tokenizer.encode(tools.prefill, { special: true }));
  }
  return { prompt, tools };
}
