// The request fields the token path serves. It builds the engine's generate request itself, so a
// field it does not read would be dropped without a word: such a field is refused with a 400 naming
// it instead (agent CLIs send fields an engine would honour; a silently ignored one makes the
// recorded behaviour differ from what the agent asked for).
import type { Endpoint } from "../openai-request.js";
import { InvalidRequestError } from "../http-errors.js";

// Read by prepareRequest (stream, n, model, logprobs, program_id, return_token_ids), sampling.ts and
// tool-plan.ts, or without effect on the tokens: end-user and cache identifiers, tags, tiers.
const COMMON = [
  "model",
  "stream",
  "stream_options",
  "n",
  "return_token_ids",
  "max_tokens",
  "temperature",
  "top_p",
  "seed",
  "stop",
  "stop_token_ids",
  "logit_bias",
  "repetition_penalty",
  "min_tokens",
  "ignore_eos",
  "presence_penalty",
  "frequency_penalty",
  "top_k",
  "min_p",
  "logprobs",
  "user",
  "metadata",
  "store",
  "service_tier",
  "prompt_cache_key",
  "prompt_cache_retention",
  "safety_identifier",
];

const SERVED: Record<Endpoint, ReadonlySet<string>> = {
  chat: new Set([
    ...COMMON,
    "messages",
    "max_completion_tokens",
    "top_logprobs",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    // vLLM's prompt ending: a generation prompt, or the final assistant message continued (checked by prepareRequest).
    "add_generation_prompt",
    "continue_final_message",
  ]),
  completions: new Set([...COMMON, "prompt", "echo", "best_of", "suffix"]),
};

// Why some fields are refused, beyond "not supported".
const HINTS: Record<string, string> = {
  functions: "the legacy function-calling fields are not supported; send tools",
  function_call: "the legacy function-calling fields are not supported; send tool_choice",
  reasoning_effort: "the policy's reasoning cannot be steered by the gateway",
};

/**
 * Refuse (400 naming it) the first field of `body` the token path does not serve for `endpoint`, and a
 * `stream_options` the engine would refuse.
 */
export function checkServedFields(endpoint: Endpoint, body: Record<string, unknown>): void {
  const served = SERVED[endpoint];
  for (const [key, value] of Object.entries(body)) {
    // An absent value asks for nothing.
    if (value === undefined || value === null || served.has(key)) continue;
    throw new InvalidRequestError(key, `${HINTS[key] ?? "is not supported"} on the token path (fields served: ${[...served].join(", ")})`);
  }
  checkStreamOptions(body);
  // The token path continues a program's context after a generation prompt or a continued final message;
  // a conversation rendered with neither (a closed last turn the model would follow) it does not build.
  if (endpoint === "chat" && body.add_generation_prompt === false && body.continue_final_message !== true) {
    throw new InvalidRequestError("add_generation_prompt", "false is served on the token path only with continue_final_message: true");
  }
}

// The engine, vLLM and OpenAI refuse stream_options that is not an object or comes without stream: true;
// the token path reads only include_usage, so the engine's continuous_usage_stats would be dropped.
function checkStreamOptions(body: Record<string, unknown>): void {
  const options = body.stream_options;
  if (options === undefined || options === null) return;
  if (typeof options !== "object" || Array.isArray(options)) {
    throw new InvalidRequestError("stream_options", `expected an object, got ${JSON.stringify(options)}`);
  }
  if (body.stream !== true) throw new InvalidRequestError("stream_options", "can only be set when stream is true");
  const { include_usage: includeUsage, continuous_usage_stats: continuous } = options as Record<string, unknown>;
  if (includeUsage !== undefined && includeUsage !== null && typeof includeUsage !== "boolean") {
    throw new InvalidRequestError("stream_options.include_usage", `must be a boolean, got ${JSON.stringify(includeUsage)}`);
  }
  if (continuous !== undefined && continuous !== null && continuous !== false) {
    throw new InvalidRequestError("stream_options.continuous_usage_stats", "is not supported on the token path (usage comes in the last chunk: include_usage)");
  }
}
