// A chat request's prompt ids, exactly as /v1/chat/completions feeds the model and /tokenize reports
// them: the messages rendered with the served model's chat template (Arbor's or the model's Jinja
// template), declared tools as the template writes them, and with a generation prompt the opening
// of a forced tool call (tool_choice "required" or a named function) tokenized with special tokens
// recognised, which the answer continues. Without a generation prompt the final message may be
// continued instead (vLLM's `continue_final_message`: an assistant "prefill" left open).
import type { ChatMessage } from "../core/types.js";
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
 * The ending a request asks for (vLLM's defaults: a generation prompt, no continuation). Continuing
 * the final message is refused, 400 naming the field, together with add_generation_prompt true (as
 * vLLM's check_generation_prompt), after a message that is not the assistant's (there is no turn of
 * the model's to continue), after tool calls, and with a forced tool call (its opening follows a
 * generation prompt, which a continuation has not).
 */
export function promptEnding(body: PromptEndingFields, messages: readonly ChatMessage[]): PromptEnding {
  if (body.continue_final_message !== true) return body.add_generation_prompt ?? true;
  if (body.add_generation_prompt === true) throw invalidRequest("continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  const last = messages.at(-1);
  if (last?.role !== "assistant") throw invalidRequest("continue_final_message", `the final message must be the assistant's to continue, got role '${last?.role ?? "none"}'`);
  if (last.toolCalls !== undefined && last.toolCalls.length > 0) throw invalidRequest("continue_final_message", "cannot continue an assistant message that makes tool calls");
  const choice = body.tool_choice;
  if (choice === "required" || (typeof choice === "object" && choice !== null)) {
    throw invalidRequest("continue_final_message", "cannot be combined with a forced tool_choice (the call's opening follows a generation prompt)");
  }
  return "continue";
}
