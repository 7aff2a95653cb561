// Translates an OpenAI chat.completion (what the backends answer) into an Anthropic Message:
// reasoning_content, text and tool_calls become thinking, text and tool_use content blocks,
// finish_reason becomes stop_reason, usage is renamed.
import { AnthropicError } from "./anthropic-error.js";
import type { AnthropicContentBlock, AnthropicMessage, AnthropicStopReason, AnthropicUsage } from "./anthropic-types.js";

/** The fields of an OpenAI chat.completion this surface reads. */
export interface ChatCompletionLike {
  id?: string;
  choices: {
    message: {
      content?: string | null;
      tool_calls?: { id?: string; type?: string; function: { name: string; arguments: string } }[] | null;
      /** The reasoning split out of the answer (vLLM's reasoning parsers, the gateway's token path). */
      reasoning_content?: string | null;
    };
    finish_reason: string | null;
    /** vLLM's extension: the stop string (or token id) that ended generation. */
    stop_reason?: string | number | null;
  }[];
  usage?: OpenAiUsage | null;
}

export interface OpenAiUsage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
  /** The token path's count with a reasoning parser; an engine's own where it reports one (passthrough). */
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
}

/**
 * Map OpenAI's finish_reason (plus vLLM's stop_reason) to Anthropic's stop_reason and stop_sequence.
 * A stop string reported by the engine means a stop sequence ended the turn.
 */
export function toStopReason(
  finishReason: string | null,
  engineStopReason?: string | number | null,
): { stop_reason: AnthropicStopReason; stop_sequence: string | null } {
  switch (finishReason) {
    case "length":
      return { stop_reason: "max_tokens", stop_sequence: null };
    case "tool_calls":
    case "function_call":
      return { stop_reason: "tool_use", stop_sequence: null };
    case "content_filter":
      return { stop_reason: "refusal", stop_sequence: null };
    case "stop":
      return typeof engineStopReason === "string"
        ? { stop_reason: "stop_sequence", stop_sequence: engineStopReason }
        : { stop_reason: "end_turn", stop_sequence: null };
    default:
      throw AnthropicError.upstream(`finish_reason ${JSON.stringify(finishReason)} is not one of stop, length, tool_calls, content_filter`);
  }
}

/** OpenAI usage → Anthropic usage (cached prompt tokens become cache reads). */
export function toAnthropicUsage(usage: OpenAiUsage | null | undefined): AnthropicUsage {
  return {
    input_tokens: usage?.prompt_tokens ?? 0,
    output_tokens: usage?.completion_tokens ?? 0,
    cache_creation_input_tokens: null,
    cache_read_input_tokens: usage?.prompt_tokens_details?.cached_tokens ?? null,
  };
}

/** `msg_` id derived from the upstream completion id, so logs of both sides line up. */
export function messageIdFor(chatId: string | undefined, fallback: string): string {
  const core = (chatId ?? "").replace(/^chatcmpl-/, "").replace(/[^A-Za-z0-9_-]/g, "");
  return `msg_${core !== "" ? core : fallback}`;
}

/** Parse a tool call's JSON arguments into the object Anthropic's `input` must be. */
export function parseToolInput(args: string, where: string): Record<string, unknown> {
  if (args.trim() === "") return {};
  let input: unknown;
  try {
    input = JSON.parse(args);
  } catch {
    throw AnthropicError.upstream(`${where}: arguments are not valid JSON: ${args.slice(0, 200)}`);
  }
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw AnthropicError.upstream(`${where}: arguments must be a JSON object, got ${args.slice(0, 200)}`);
  }
  return input as Record<string, unknown>;
}

/**
 * Translate an OpenAI chat.completion into an Anthropic Message answering a request for `requestModel`.
 * Throws {@link AnthropicError} (502) when the upstream answer cannot be expressed (no choice,
 * tool arguments that are not a JSON object, unknown finish_reason).
 */
export function chatToAnthropic(chat: ChatCompletionLike, requestModel: string): AnthropicMessage {
  const choice = chat.choices[0];
  if (!choice) throw AnthropicError.upstream("choices is empty");
  const content: AnthropicContentBlock[] = [];
  const thinking = choice.message.reasoning_content;
  if (typeof thinking === "string" && thinking !== "") content.push({ type: "thinking", thinking, signature: "" });
  const text = choice.message.content;
  if (typeof text === "string" && text !== "") content.push({ type: "text", text });
  const id = messageIdFor(chat.id, "0");
  (choice.message.tool_calls ?? []).forEach((tc, i) => {
    const where = `choices.0.message.tool_calls.${i}.function`;
    content.push({
      type: "tool_use",
      id: tc.id && tc.id !== "" ? tc.id : `toolu_${id.slice(4)}_${i}`,
      name: tc.function.name,
      input: parseToolInput(tc.function.arguments, where),
    });
  });
  return {
    id,
    type: "message",
    role: "assistant",
    model: requestModel,
    content,
    ...toStopReason(choice.finish_reason, choice.stop_reason),
    usage: toAnthropicUsage(chat.usage),
  };
}
