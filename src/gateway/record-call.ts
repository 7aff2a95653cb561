// Recording one finished call: the trace sink, the program table, the token metrics and the
// program's history/context the next call continues from. The write is not awaited here: the
// answer goes out while the store commits (off the request path); the program table tracks the
// write, ends the program only after it settled, and refuses the program's later calls if it failed.
import type { Backend } from "../backends/backend.js";
import type { Call, MaxTokensClamp } from "../core/types.js";
import { callRecorded, type CallPlace } from "./call-path.js";
import type { GatewayContext } from "./gateway-context.js";
import { budgetField, prefillOf, type PreparedRequest } from "./openai-request.js";
import type { ExtractedTrace } from "./trace-extract.js";

export type { CallPlace } from "./call-path.js";

/** What a token-path call records beyond its trace: its prompt's reset flags and a clamped max_tokens (nothing when neither). */
export function tokenPathFlags(p: {
  contextReset: boolean;
  contextResetReason?: string;
  maxTokensClamped?: MaxTokensClamp;
}): Pick<Call, "contextReset" | "contextResetReason" | "maxTokensClamped"> {
  const clamp = p.maxTokensClamped ? { maxTokensClamped: p.maxTokensClamped } : {};
  if (!p.contextReset) return clamp;
  return { contextReset: true, ...(p.contextResetReason !== undefined ? { contextResetReason: p.contextResetReason } : {}), ...clamp };
}

/**
 * The clamp a call records: the gateway's own (to what the context left), reaching back to the budget the agent
 * asked for where Arbor's black-box proxy had lowered it first (agent.maxTokensPerCall).
 */
function recordedClamp(prepared: PreparedRequest, clamp: MaxTokensClamp | undefined): MaxTokensClamp | undefined {
  const asked = prepared.maxTokensAsked;
  if (asked === undefined) return clamp;
  const sent = prepared.upstreamBody[budgetField(prepared.endpoint, prepared.upstreamBody)];
  const granted = clamp?.granted ?? (typeof sent === "number" ? sent : undefined);
  return granted !== undefined && asked > granted ? { asked, granted } : clamp;
}

/** Record one finished call: start its write to the sink (tracked by the program table) and update the table. */
export function recordCall(
  ctx: GatewayContext,
  trace: ExtractedTrace,
  id: string,
  backend: Backend,
  prepared: PreparedRequest,
  place: CallPlace,
  flags: Pick<Call, "trainable" | "contextReset" | "contextResetReason" | "maxTokensClamped"> = {},
): Call {
  const { programId, index, start } = place;
  const { maxTokensClamped: flagClamp, ...rest } = flags;
  const clamp = recordedClamp(prepared, flagClamp ?? prepared.maxTokensClamped);
  const call: Call = {
    id,
    programId,
    index,
    messages: prepared.messages,
    promptTokenIds: trace.promptTokenIds,
    outputTokenIds: trace.outputTokenIds,
    logprobs: trace.logprobs,
    outputText: trace.outputText,
    finishReason: trace.finishReason,
    backend: backend.name,
    ...(backend.servedModel !== undefined ? { servedModel: backend.servedModel } : {}),
    ...(prepared.requestedModel !== undefined ? { requestedModel: prepared.requestedModel } : {}),
    policyVersion: trace.policyVersion,
    ...(trace.tokenPolicyVersions ? { tokenPolicyVersions: trace.tokenPolicyVersions } : {}),
    timings: { start, end: ctx.clock.now() },
    ...(clamp ? { maxTokensClamped: clamp } : {}),
    ...rest,
  };
  let write: Promise<void>;
  try {
    write = ctx.sink.recordCall(call);
  } catch (e) {
    // A sink that throws instead of rejecting fails the same way.
    write = Promise.reject(e instanceof Error ? e : new Error(String(e)));
  }
  ctx.table.track(programId, index, write);
  callRecorded(ctx, programId, trace.promptTokenIds, trace.outputTokenIds);
  ctx.metrics.promptTokens.inc(trace.promptTokenIds.length);
  ctx.metrics.outputTokens.inc(trace.outputTokenIds.length);
  // No engine token ids to continue from: the next call starts afresh. A program released while the call ran
  // keeps none either: its release has forgotten it already, so a context kept now would never go.
  if (flags.trainable === false || !ctx.table.isActive(programId)) {
    ctx.history.delete(programId);
    ctx.contexts.delete(programId);
  } else {
    // A continued final message is the answer turn's start: the context's answer turn is the prefill
    // followed by the continuation, as the client sends it back (the recorded call keeps the request as sent).
    const prefill = prefillOf(prepared);
    ctx.contexts.set(programId, {
      endpoint: prepared.endpoint,
      messages: prefill ? prepared.messages.slice(0, -1) : prepared.messages,
      promptTokenIds: trace.promptTokenIds,
      outputTokenIds: trace.outputTokenIds,
      outputText: (prefill?.content ?? "") + trace.outputText,
      finishReason: trace.finishReason,
      ...(Array.isArray(prepared.upstreamBody.tools) && prepared.upstreamBody.tools.length > 0 ? { tools: prepared.upstreamBody.tools } : {}),
    });
  }
  return call;
}
