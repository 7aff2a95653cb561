// Request bodies of the OpenAI-compatible endpoints, validated with zod. Fields Arbor does not
// implement are rejected when set to a non-default value rather than silently ignored.
import { z } from "zod";
import type { ChatMessage } from "../core/types.js";
import { toolCallsAsMarkup } from "../model/tool-markup.js";

const nonNegInt = z.number().int().min(0);
const maxTokens = z.number().int().min(1).nullish();
const temperature = z.number().min(0).max(100).nullish();
const topP = z.number().gt(0).max(1).nullish();
const seed = z.number().int().nullish();
/** vLLM's request priority: lower = sooner, only on engines with the "priority" scheduling policy. */
const priority = z.number({ error: "must be an integer" }).int({ error: "must be an integer" }).nullish();
/** Arbor: the agent program the request belongs to (program-aware KV; also header `x-arbor-program`). */
const programId = z
  .string({ error: "must be a string" })
  .min(1, { error: "must not be empty" })
  .max(256, { error: "must be at most 256 characters" })
  .nullish();
const streamOptions = z
  .object({
    /** A last chunk with `usage` and no choices. */
    include_usage: z.boolean().nullish(),
    /** `usage` on every chunk (vLLM). */
    continuous_usage_stats: z.boolean().nullish(),
  })
  .nullish();

// Sampling controls no tiny-policy client needs yet; accepted only at their no-op values.
const unsupported = {
  n: z.literal(1, { error: "only n = 1 is supported" }).nullish(),
  stop: z
    .union([z.string(), z.array(z.string())])
    .nullish()
    .refine((s) => s == null || (Array.isArray(s) && s.length === 0), {
      error: "stop strings are not supported yet (generation stops on </s> and <|end|>)",
    }),
  presence_penalty: z.literal(0, { error: "presence_penalty is not supported (must be 0)" }).nullish(),
  frequency_penalty: z.literal(0, { error: "frequency_penalty is not supported (must be 0)" }).nullish(),
};

const textPart = z.object({ type: z.literal("text"), text: z.string() });

const toolCall = z.object({
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

export const ChatMessageSchema = z
  .object({
    role: z.enum(["system", "user", "assistant", "tool"]),
    // null: an assistant turn that only made tool calls.
    content: z.union([z.string(), z.array(textPart)], { error: "must be a string or an array of text parts" }).nullish(),
    name: z.string().optional(),
    tool_calls: z.array(toolCall).nullish(),
    tool_call_id: z.string().nullish(),
  })
  .refine((m) => m.content != null || (m.role === "assistant" && (m.tool_calls?.length ?? 0) > 0), {
    error: "must be a string or an array of text parts (null only for an assistant message with tool_calls)",
    path: ["content"],
  });

/** OpenAI function tools (the only kind a chat completion declares); also what /tokenize needs to render them. */
export const ChatToolsSchema = z
  .array(
    z.object({
      type: z.literal("function", { error: "only function tools are supported" }),
      function: z.object({
        name: z.string().regex(/^[A-Za-z_][\w-]*$/, { error: "must be letters, digits, _ or - (not starting with a digit or -)" }),
        description: z.string().nullish(),
        parameters: z.record(z.string(), z.unknown()).nullish(),
        strict: z.boolean().nullish(),
      }),
    }),
  )
  .nullish();
const toolChoice = z
  .union([z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), function: z.object({ name: z.string().min(1) }) })], {
    error: 'must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}',
  })
  .nullish();

export const ChatCompletionRequestSchema = z.object({
  model: z.string().nullish(),
  messages: z.array(ChatMessageSchema).min(1, { error: "must contain at least one message" }),
  max_tokens: maxTokens,
  max_completion_tokens: maxTokens,
  temperature,
  top_p: topP,
  seed,
  logprobs: z.boolean().nullish(),
  top_logprobs: nonNegInt.max(20).nullish(),
  return_token_ids: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptions,
  priority,
  program_id: programId,
  tools: ChatToolsSchema,
  tool_choice: toolChoice,
  parallel_tool_calls: z.boolean().nullish(),
  ...unsupported,
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

export const CompletionRequestSchema = z.object({
  model: z.string().nullish(),
  prompt: z.union([z.string(), z.array(nonNegInt).min(1)], {
    error: "must be a string or a non-empty array of token ids (integers >= 0)",
  }),
  max_tokens: maxTokens,
  temperature,
  top_p: topP,
  seed,
  logprobs: nonNegInt.max(20).nullish(),
  return_token_ids: z.boolean().nullish(),
  echo: z.literal(false, { error: "echo is not supported (must be false)" }).nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptions,
  priority,
  program_id: programId,
  ...unsupported,
});
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

/**
 * Request messages as Arbor chat messages (text parts joined by newlines). An assistant turn's
 * `tool_calls` are written after its text in the policy's tool-call markup, as the policy emits them.
 */
export function toChatMessages(messages: readonly z.infer<typeof ChatMessageSchema>[]): ChatMessage[] {
  return messages.map((m) => {
    const text = m.content == null ? "" : typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("\n");
    const content = m.role === "assistant" && m.tool_calls ? toolCallsAsMarkup(text, m.tool_calls) : text;
    return { role: m.role, content, ...(m.name !== undefined ? { name: m.name } : {}) };
  });
}
