// The OpenAI answer of a token-path call, built from what the engine generated: the same shape the
// engine's own chat.completion / text_completion has (vLLM's token_ids and prompt_token_ids,
// Arbor's policy_version), with text decoded by the engine and, for a chat answer, tool calls and
// reasoning read out with the backend's parsers (answer-plan.ts) as vLLM's parsers do.
import type { GenerateResult } from "../../backends/backend.js";
import type { Endpoint } from "../openai-request.js";
import { readAnswer, reasoningTokensOf, type AnswerPlan, type ChatAnswer } from "./answer-plan.js";

/** Text the engine decoded for one call: the answer and, when logprobs were asked, each token. */
export interface DecodedOutput {
  text: string;
  /** One string per output token (only when the client asked for logprobs). */
  tokenTexts?: string[];
}

export interface TokenAnswerInput {
  endpoint: Endpoint;
  /** The call id (also sent as x-arbor-call-id); the answer's id derives from it. */
  callId: string;
  /** Unix seconds. */
  created: number;
  model: string;
  promptTokenIds: number[];
  result: GenerateResult;
  decoded: DecodedOutput;
  logprobs: boolean;
  /** How the chat answer is read: calls become `tool_calls`, reasoning `reasoning_content`. */
  answer?: AnswerPlan;
  /** The client's stops by token id (a stop string, or a stop token id as given): the answer's `stop_reason`. */
  stops?: ReadonlyMap<number, string | number>;
}

/**
 * vLLM's `stop_reason`: the client's stop (string or token id) the generation ended on, null when
 * it ended otherwise (the model's own end token, the length). The Anthropic surface reports it as
 * stop_reason "stop_sequence" with the string.
 */
export function stopReasonOf(result: GenerateResult, stops: ReadonlyMap<number, string | number> | undefined): string | number | null {
  const last = result.outputTokenIds.at(-1);
  if (result.finishReason !== "stop" || last === undefined || stops === undefined) return null;
  return stops.get(last) ?? null;
}

/** JSON has no -Infinity; vLLM reports impossible tokens as -9999. */
const jsonLogprob = (lp: number): number => (Number.isFinite(lp) ? lp : -9999);

/** Output ids that are the answer's content: a final stop token is not part of the text. */
export function contentTokenIds(result: GenerateResult): number[] {
  return result.finishReason === "stop" && result.outputTokenIds.length > 0 ? result.outputTokenIds.slice(0, -1) : result.outputTokenIds;
}

/**
 * An answer's usage; with a reasoning parser (chat), OpenAI's `completion_tokens_details.reasoning_tokens`
 * counted on the output ids (the Responses surface reports it as `output_tokens_details.reasoning_tokens`).
 */
export function usageOf(promptTokens: number, result: GenerateResult, answer: AnswerPlan | undefined): Record<string, unknown> {
  const completion = result.outputTokenIds.length;
  const reasoning = reasoningTokensOf(answer, contentTokenIds(result));
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completion,
    total_tokens: promptTokens + completion,
    ...(reasoning !== undefined ? { completion_tokens_details: { reasoning_tokens: reasoning } } : {}),
  };
}

/** Build the chat.completion or text_completion body. */
export function tokenAnswer(a: TokenAnswerInput): Record<string, unknown> {
  const { result, decoded } = a;
  const ids = result.outputTokenIds;
  const usage = usageOf(a.promptTokenIds.length, result, a.answer);
  const texts = decoded.tokenTexts ?? [];
  const common = { created: a.created, model: a.model };
  const policy = result.policyVersion !== null ? { policy_version: result.policyVersion } : {};
  if (a.endpoint === "chat") {
    const { message, finishReason } = chatMessage(a);
    const logprobs = a.logprobs
      ? {
          content: ids.map((_, i) => {
            const token = texts[i] ?? "";
            return { token, logprob: jsonLogprob(result.logprobs[i] as number), bytes: [...Buffer.from(token, "utf8")], top_logprobs: [] };
          }),
        }
      : null;
    return {
      id: `chatcmpl-${a.callId.replaceAll("-", "")}`,
      object: "chat.completion",
      ...common,
      choices: [{ index: 0, message, logprobs, finish_reason: finishReason, stop_reason: stopReasonOf(result, a.stops), token_ids: ids }],
      usage,
      prompt_token_ids: a.promptTokenIds,
      ...policy,
    };
  }
  let logprobs: unknown = null;
  if (a.logprobs) {
    const offsets: number[] = [];
    let at = 0;
    for (const t of texts) {
      offsets.push(at);
      at += t.length;
    }
    logprobs = {
      tokens: texts,
      token_logprobs: result.logprobs.map(jsonLogprob),
      top_logprobs: texts.map((t, i) => ({ [t]: jsonLogprob(result.logprobs[i] as number) })),
      text_offset: offsets,
    };
  }
  return {
    id: `cmpl-${a.callId.replaceAll("-", "")}`,
    object: "text_completion",
    ...common,
    choices: [
      { index: 0, text: decoded.text, logprobs, finish_reason: result.finishReason, stop_reason: stopReasonOf(result, a.stops), token_ids: ids, prompt_token_ids: a.promptTokenIds },
    ],
    usage,
    ...policy,
  };
}

/** Tool call ids of one answer: `call_<call id hex>_<n>`, unique across a conversation. */
export function toolCallIdPrefix(callId: string): string {
  return `call_${callId.replaceAll("-", "")}`;
}

/** The chat answer's message and finish_reason (tool calls and reasoning read out with the answer plan). */
export function chatMessage(a: Pick<TokenAnswerInput, "callId" | "result" | "decoded" | "answer">): ChatAnswer {
  return readAnswer(a.decoded.text, a.result.finishReason, a.answer ?? {}, toolCallIdPrefix(a.callId));
}
