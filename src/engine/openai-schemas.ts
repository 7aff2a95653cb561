// Request bodies of the OpenAI-compatible endpoints, validated with zod. Fields Arbor does not
// implement are rejected when set to a non-default value rather than silently ignored; vLLM's
// sampling controls (logit_bias, repetition_penalty, min_tokens, ignore_eos, stop_token_ids) are honoured.
import { z } from "../core/zod.js";
import type { ChatMessage } from "../core/types.js";
import { invalidRequest } from "./openai-errors.js";
import type { SamplingControls } from "./sampling.js";
import { KvTransferParamsSchema } from "./http/kv-handoff.js";

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

/** A field Arbor does not implement: accepted only absent, null or at its no-op value; else 400 naming it. */
const onlyNoOp = (isNoOp: (v: unknown) => boolean, reason: string) => z.unknown().refine((v) => v == null || isNoOp(v), { error: reason }).optional();

// vLLM's logit controls and stop rules, which the engine honours (vLLM's semantics; see sampling.ts).
const samplingControls = {
  /** Token id (as a string, as OpenAI sends it) → bias added to its logit; clamped to [-100, 100] as vLLM. */
  logit_bias: z
    .record(z.string().regex(/^\d+$/, { error: "keys must be token ids (strings of digits)" }), z.number({ error: "biases must be numbers" }), {
      error: "must be an object mapping token ids to biases",
    })
    .nullish(),
  repetition_penalty: z.number({ error: "must be a number" }).gt(0, { error: "must be greater than zero" }).max(1e6).nullish(),
  min_tokens: z.number({ error: "must be an integer" }).int({ error: "must be an integer" }).min(0, { error: "must be greater than or equal to 0" }).nullish(),
  ignore_eos: z.boolean({ error: "must be a boolean" }).nullish(),
  stop_token_ids: z.array(nonNegInt, { error: "must be a list of token ids (integers >= 0)" }).max(1024, { error: "must list at most 1024 token ids" }).nullish(),
};

// Sampling controls no tiny-policy client needs yet; accepted only at their no-op values. As vLLM
// answers fields it cannot honour (suffix, best_of with streaming...), a non-default value is a 400
// naming the field rather than being ignored: a silently dropped control changes what is sampled.
const unsupported = {
  best_of: onlyNoOp((v) => v === 1, "is not supported (only 1)"),
  response_format: onlyNoOp((v) => typeof v === "object" && (v as { type?: unknown }).type === "text", 'is not supported (only {"type": "text"}: no constrained decoding)'),
  top_k: onlyNoOp((v) => v === 0 || v === -1, "is not supported (0 or -1: disabled)"),
  min_p: onlyNoOp((v) => v === 0, "is not supported (must be 0)"),
  guided_json: onlyNoOp(() => false, "is not supported (no guided decoding)"),
  guided_regex: onlyNoOp(() => false, "is not supported (no guided decoding)"),
  guided_choice: onlyNoOp(() => false, "is not supported (no guided decoding)"),
  guided_grammar: onlyNoOp(() => false, "is not supported (no guided decoding)"),
  structured_outputs: onlyNoOp(() => false, "is not supported (no structured outputs)"),
  bad_words: onlyNoOp((v) => Array.isArray(v) && v.length === 0, "is not supported"),
  allowed_token_ids: onlyNoOp(() => false, "is not supported"),
  prompt_logprobs: onlyNoOp(() => false, "is not supported"),
  include_stop_str_in_output: onlyNoOp((v) => v === false, "is not supported (no stop strings)"),
  use_beam_search: onlyNoOp((v) => v === false, "is not supported (no beam search)"),
  logits_processors: onlyNoOp(() => false, "is not supported"),
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
    /** vLLM: an assistant turn's reasoning, given back so templates that render it see it. */
    reasoning_content: z.string().nullish(),
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
  /** Arbor: speculative decoding's draft group (GRPO siblings draft from each other's responses). */
  draft_group_id: programId,
  /** Prefill/decode disaggregation (http/kv-handoff.ts). */
  kv_transfer_params: KvTransferParamsSchema,
  tools: ChatToolsSchema,
  tool_choice: toolChoice,
  parallel_tool_calls: z.boolean().nullish(),
  /** vLLM's prompt ending: a generation prompt (default), or the final assistant message continued (chat-prompt.ts promptEnding). */
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
  ...samplingControls,
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
  /** Arbor: speculative decoding's draft group (GRPO siblings draft from each other's responses). */
  draft_group_id: programId,
  /** Prefill/decode disaggregation (http/kv-handoff.ts). */
  kv_transfer_params: KvTransferParamsSchema,
  suffix: onlyNoOp(() => false, "is not currently supported"),
  ...samplingControls,
  ...unsupported,
});
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

/**
 * Request messages as Arbor chat messages (text parts joined by newlines), an assistant turn's
 * `tool_calls` and `reasoning_content` and a tool turn's `tool_call_id` kept as fields: the chat
 * format decides how they read (Arbor's writes calls as its markup after the text, as the policy
 * emits them; a Jinja template gets them in HF shape).
 */
export function toChatMessages(messages: readonly z.infer<typeof ChatMessageSchema>[]): ChatMessage[] {
  return messages.map((m, i) => {
    const content = m.content == null ? "" : typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("\n");
    const out: ChatMessage = { role: m.role, content, ...(m.name !== undefined ? { name: m.name } : {}) };
    if (m.role === "assistant" && m.tool_calls && m.tool_calls.length > 0) {
      out.toolCalls = m.tool_calls.map((c, k) => ({ id: c.id ?? `call_${i}_${k}`, name: c.function.name, arguments: c.function.arguments }));
    }
    if (m.role === "tool" && m.tool_call_id != null) out.toolCallId = m.tool_call_id;
    if (m.role === "assistant" && m.reasoning_content != null) out.reasoning = m.reasoning_content;
    return out;
  });
}

type ControlFields = { [K in keyof typeof samplingControls]?: z.infer<(typeof samplingControls)[K]> };

/**
 * A validated body's vLLM controls as the executor's {@link SamplingControls} (undefined when all
 * are at their defaults), checked against the vocabulary and the resolved `max_tokens` as vLLM's
 * SamplingParams does. logit_bias values are clamped to [-100, 100] (vLLM's OpenAI layer).
 * Throws a 400 naming the field.
 */
export function toSamplingControls(body: ControlFields, maxTokens: number, maxParam: string, vocabSize: number): SamplingControls | undefined {
  const c: SamplingControls = {};
  if (body.logit_bias != null && Object.keys(body.logit_bias).length > 0) {
    const bias = new Map<number, number>();
    const outside: string[] = [];
    for (const [key, value] of Object.entries(body.logit_bias)) {
      const id = Number(key);
      if (!Number.isSafeInteger(id) || id >= vocabSize) outside.push(key);
      else bias.set(id, Math.min(100, Math.max(-100, value)));
    }
    if (outside.length > 0) throw invalidRequest("logit_bias", `token id(s) ${outside.slice(0, 10).join(", ")} are outside the vocabulary (size ${vocabSize})`);
    c.logitBias = bias;
  }
  if (body.repetition_penalty != null && body.repetition_penalty !== 1) c.repetitionPenalty = body.repetition_penalty;
  if (body.min_tokens != null && body.min_tokens > 0) {
    if (body.min_tokens > maxTokens) throw invalidRequest("min_tokens", `must be less than or equal to ${maxParam}=${maxTokens}, got ${body.min_tokens}`);
    c.minTokens = body.min_tokens;
  }
  if (body.ignore_eos === true) c.ignoreEos = true;
  if (body.stop_token_ids != null && body.stop_token_ids.length > 0) {
    const bad = body.stop_token_ids.findIndex((t) => t >= vocabSize);
    if (bad >= 0) throw invalidRequest(`stop_token_ids[${bad}]`, `token id ${body.stop_token_ids[bad]} is outside the vocabulary (size ${vocabSize})`);
    c.stopTokenIds = body.stop_token_ids;
  }
  return Object.keys(c).length > 0 ? c : undefined;
}
