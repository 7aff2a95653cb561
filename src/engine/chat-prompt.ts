// A chat request's prompt ids, exactly as /v1/chat/completions feeds the model and /tokenize reports
// them: the messages rendered with the served model's chat template (Arbor's or the model's Jinja
// template), declared tools as the template writes them, and with a generation prompt the opening
// of a forced tool call (tool_choice "required" or a named function) tokenized with special tokens
// recognised, which the answer continues. Without a generation prompt the final message may be
// continued instead (vLLM's `continue_final_message`: an assistant "prefill" left open).
import type { ChatMessage } from "../core/types.js";
import { continueFinalRefusal } from "../model/continue-final.js";
import type { ToolFields } from "../model/tool-markup.js";
import { invalidRequest } from "./openai-errors.js";
import { toolPlan, type ChatPrompt } from "./openai-tools.js";
import type { ServedModel } from "./served-model.js";

/** The model-family parsers a chat request is read with (engine options; registry names). */
export interface ChatParsers {
  /** Tool-call parser name (e.g. "hermes"); absent: Arbor's markup. */
  toolParser?: string;
  /** Reasoning parser name (e.g. "think"); absent: none. */
  reasoningParser?: string;
}

/**
 * How the conversation ends: a generation prompt opening the assistant's turn, the final message
 * continued (`"continue"`: its turn left open), or neither (the turns as they are).
 */
export type PromptEnding = boolean | "continue";

/** Render a chat request for `served`; see the file header. */
export function renderChatPrompt(
  messages: readonly ChatMessage[],
  body: ToolFields,
  served: ServedModel,
  ending: PromptEnding,
  parsers: ChatParsers = {},
): ChatPrompt {
  const tools = toolPlan(body, parsers);
  const addGenerationPrompt = ending === true;
  const prompt = served.chat.render(messages, {
    addGenerationPrompt,
    ...(ending === "continue" ? { continueFinalMessage: true } : {}),
    ...(tools ? { tools: tools.specs } : {}),
  });
  if (addGenerationPrompt && tools?.prefill !== undefined) {
    // Special tokens on: a format's call opening (`<|tool_call|>`, `<tool_call>`, `[TOOL_CALLS]`) is one token.
    prompt.push(...served.tokenizer.encode(tools.prefill, { special: true }));
  }
  return { prompt, tools };
}

/** A request's prompt-ending fields, as vLLM's chat and /tokenize take them. */
export interface PromptEndingFields {
  add_generation_prompt?: boolean | null | undefined;
  continue_final_message?: boolean | null | undefined;
  tool_choice?: unknown;
}

/**
 * The ending a request asks for (vLLM's defaults: a generation prompt, no continuation); continuing the final
 * message is refused, 400 naming the field, where vLLM refuses it (model/continue-final.ts).
 */
export function promptEnding(body: PromptEndingFields, messages: readonly ChatMessage[]): PromptEnding {
  if (body.continue_final_message !== true) return body.add_generation_prompt ?? true;
  const refused = continueFinalRefusal(body.add_generation_prompt, body.tool_choice, messages);
  if (refused !== undefined) throw invalidRequest("continue_final_message", refused);
  return "continue";
}
