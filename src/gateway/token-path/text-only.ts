// The trace of a call served by a generic OpenAI backend that reports no token ids: its text only,
// with empty token fields (such calls are recorded as not trainable).
import type { PreparedRequest } from "../openai-request.js";
import { finishReasonOf, TraceShapeError, type ExtractedTrace } from "../trace-extract.js";

/**
 * The body a generic provider gets: the client's own, without the token-level fields the gateway
 * adds for engines (a provider such as OpenAI rejects unknown arguments like return_token_ids).
 */
export function textOnlyBody(prepared: PreparedRequest): Record<string, unknown> {
  const body = { ...prepared.upstreamBody };
  if (!prepared.clientWantsTokenIds) delete body.return_token_ids;
  if (!prepared.clientWantsLogprobs) delete body.logprobs;
  return body;
}

/** Read choice 0's text and finish reason; throws {@link TraceShapeError} when there is no choice. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function textOnlyTrace(json: any): ExtractedTrace {
  const choice = Array.isArray(json?.choices) ? json.choices[0] : undefined;
  if (typeof choice !== "object" || choice === null) throw new TraceShapeError("returned no choices[0]");
  const text: unknown = choice.message?.content ?? choice.text ?? "";
  return {
    promptTokenIds: [],
    outputTokenIds: [],
    logprobs: [],
    outputText: typeof text === "string" ? text : "",
    finishReason: finishReasonOf(choice.finish_reason),
    // No engine weights version is known for a generic provider.
    policyVersion: 0,
  };
}
