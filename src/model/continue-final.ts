// When a chat request may continue its final message (vLLM's `continue_final_message`: an assistant "prefill" left
// open, no generation prompt): the checks vLLM makes, shared by Arbor's engine and the gateway's token path, which
// each answer a refusal in their own error shape, naming `continue_final_message`.
import type { ChatMessage } from "../core/types.js";

/**
 * Why a request may not continue its final message, or undefined when it may: together with
 * add_generation_prompt true (vLLM's check_generation_prompt, its wording), after a message that is not the
 * assistant's (there is no turn of the model's to continue), after tool calls, and with a forced tool call (its
 * opening follows a generation prompt, which a continuation has not).
 */
export function continueFinalRefusal(addGenerationPrompt: unknown, toolChoice: unknown, messages: readonly ChatMessage[]): string | undefined {
  if (addGenerationPrompt === true) return "Cannot set both `continue_final_message` and `add_generation_prompt` to True.";
  const last = messages.at(-1);
  if (last?.role !== "assistant") return `the final message must be the assistant's to continue, got role '${last?.role ?? "none"}'`;
  if (last.toolCalls !== undefined && last.toolCalls.length > 0) return "cannot continue an assistant message that makes tool calls";
  if (toolChoice === "required" || (typeof toolChoice === "object" && toolChoice !== null)) {
    return "cannot be combined with a forced tool_choice (the call's opening follows a generation prompt)";
  }
  return undefined;
}
