// A streamed call on the token path: the prompt is built as for serve-token-path.ts, the engine
// streams token ids, and the gateway writes the chunks itself through the call's StreamSurface
// (OpenAI chunks, or Anthropic / Responses events).
import { BackendHttpError, BackendUnreachableError, type Backend } from "../backends/backend.js";
import { inClientTerms } from "./client-fields.js";
import type { GatewayContext } from "./gateway-context.js";
import { openAiError, openAiErrorType } from "./http-errors.js";
import { prefillOf } from "./openai-request.js";
import { recordCall, tokenPathFlags } from "./record-call.js";
import { rememberAnswer } from "./remember-answer.js";
import { sseResponse } from "./sse-response.js";
import { openAiStreamSurface, type StreamSurface } from "./surfaces/stream-surface.js";
import { tokenCallInput } from "./serve-token-path.js";
import { usesTokenStream } from "./token-path-choice.js";
import { visibleChunk } from "./token-path/token-chunks.js";
import { openTokenStream, streamTokenAnswer, type OpenedTokenStream } from "./token-path/token-stream.js";
import { tokenRouting, type RoutedTokenCall } from "./token-routing.js";
import { tokenVersionsOf, type ExtractedTrace } from "./trace-extract.js";

/**
 * Serve a streamed call routed to `call.first` on the token path. Exactly one Call is recorded when the
 * answer is complete; a stream cut short (engine, client, timeout) records nothing and cancels the
 * engine's request.
 */
export async function serveTokenStream(ctx: GatewayContext, call: RoutedTokenCall): Promise<{ recorded: boolean; result: unknown }> {
  const { endpoint, prepared, place, reply } = call;
  const { programId, index } = place;
  const callId = ctx.newCallId();
  const routing = tokenRouting(ctx, call, (b) => usesTokenStream(ctx, b, prepared));
  const makeSurface = ctx.streamSurfaces.get(prepared);
  const surfaceFor = (backend: Backend): StreamSurface => makeSurface?.(backend, callId) ?? openAiStreamSurface();
  const sse = sseResponse(reply.raw, callId, index);
  try {
    let opened: OpenedTokenStream;
    let plan: ReturnType<typeof routing.plan>;
    try {
      plan = routing.plan(endpoint);
      opened = await openTokenStream(
        tokenCallInput(ctx, call, plan),
        { ...routing.deps, finished: (routeId) => ctx.router.onFinished(routeId, { outputTokens: 0, ok: false }) },
      );
    } catch (e) {
      // Before the stream began: answered with a status, in the surface's shape (the engine's own 4xx as it sent it).
      const surface = surfaceFor(ctx.backends.get(call.first.backend) as Backend);
      if (e instanceof BackendHttpError && e.status < 500) {
        const body = e.body !== undefined ? inClientTerms(e.body, endpoint, prepared.clientNames) : openAiError(e.message, openAiErrorType(e.status), null, "upstream_error");
        return { recorded: false, result: reply.code(e.status).send(makeSurface ? surface.upstreamErrorBody(e.status, body) : body) };
      }
      if (!makeSurface) throw e;
      const { status, body } = surface.errorResponse(e);
      return { recorded: false, result: reply.code(status).send(body) };
    }
    const { sampling } = plan;
    // From here the gateway writes the response itself; nothing below may throw to fastify.
    reply.hijack();
    const surface = surfaceFor(opened.backend);
    const want = { logprobs: prepared.clientWantsLogprobs, tokenIds: prepared.clientWantsTokenIds };
    const streamOptions = prepared.upstreamBody.stream_options as { include_usage?: unknown } | null | undefined;
    let routed = false;
    try {
      const { result, text } = await streamTokenAnswer(
        opened,
        {
          endpoint,
          callId,
          created: Math.floor(ctx.clock.now() / 1000),
          model: sampling.model,
          logprobs: sampling.logprobs,
          includeUsage: streamOptions?.include_usage === true,
        },
        (chunks) => {
          for (const c of chunks) sse.write(surface.chunk(visibleChunk(c, want), c));
        },
      );
      const trace: ExtractedTrace = {
        promptTokenIds: opened.promptTokenIds,
        outputTokenIds: result.outputTokenIds,
        logprobs: result.logprobs,
        outputText: text,
        finishReason: result.finishReason,
        policyVersion: result.policyVersion ?? 0,
        ...tokenVersionsOf(result.tokenPolicyVersions, result.policyVersion ?? 0),
      };
      // Translated before recording: an answer the surface cannot close is a failed call.
      const closing = surface.finish();
      recordCall(ctx, trace, callId, opened.backend, prepared, place, tokenPathFlags(opened));
      routed = true;
      ctx.router.onFinished(opened.routeId, { promptTokens: trace.promptTokenIds, outputTokens: trace.outputTokenIds, ok: true });
      rememberAnswer(ctx, programId, endpoint, { callId, result, decoded: { text }, answer: opened.answer }, prefillOf(prepared));
      sse.write(closing, true);
      return { recorded: true, result: undefined };
    } catch (err) {
      if (!routed) ctx.router.onFinished(opened.routeId, { outputTokens: 0, ok: false });
      if (err instanceof BackendUnreachableError) ctx.health.callFailed(opened.backend.name, err.message);
      sse.fail(surface, err);
      return { recorded: false, result: undefined };
    } finally {
      opened.done();
    }
  } finally {
    routing.close();
  }
}
