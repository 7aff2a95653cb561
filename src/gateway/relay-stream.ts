// The passthrough's streamed call: the engine's events relayed to the client through the call's
// stream surface, the trace assembled on the way and recorded once the engine sends [DONE].
import type { FastifyReply } from "fastify";
import { BackendProtocolError, type Backend } from "../backends/backend.js";
import { isStreamingBackend, type BackendStreamReply } from "../backends/sse.js";
import { boundedCall } from "./client-close.js";
import { inClientTerms } from "./client-fields.js";
import type { GatewayContext } from "./gateway-context.js";
import { InvalidRequestError } from "./http-errors.js";
import type { Endpoint, PreparedRequest } from "./openai-request.js";
import { readTrace } from "./protocol-trace.js";
import { recordCall, type CallPlace } from "./record-call.js";
import { sseResponse } from "./sse-response.js";
import { StreamTrace } from "./stream-trace.js";
import { openAiStreamSurface, UpstreamStreamError, type StreamChunk } from "./surfaces/stream-surface.js";
import type { ExtractedTrace } from "./trace-extract.js";

/**
 * Relay a streamed call event by event and record it once the upstream sends [DONE]. Each chunk
 * reaches the client through the call's StreamSurface (OpenAI chunks as they are, or the
 * Anthropic / Responses events a surface route registered in `ctx.streamSurfaces`). An error before
 * the stream starts is answered with its status (as for plain calls); after it, as the surface's
 * error event. A stream cut short (upstream, client or timeout) records nothing.
 */
export async function relayStream(
  ctx: GatewayContext,
  backend: Backend,
  endpoint: Endpoint,
  prepared: PreparedRequest,
  place: CallPlace,
  reply: FastifyReply,
): Promise<{ trace?: ExtractedTrace; result: unknown }> {
  const { signal, done } = boundedCall(ctx, backend.name, reply.raw);
  const callId = ctx.newCallId();
  const surface = ctx.streamSurfaces.get(prepared)?.(backend, callId) ?? openAiStreamSurface();
  const sse = sseResponse(reply.raw, callId, place.index);
  try {
    let upstream: BackendStreamReply;
    try {
      if (!isStreamingBackend(backend)) throw new InvalidRequestError("stream", `backend '${backend.name}' cannot stream; send stream: false`);
      upstream = endpoint === "chat"
        ? await backend.chatCompletionsStream(prepared.upstreamBody, signal)
        : await backend.completionsStream(prepared.upstreamBody, signal);
    } catch (err) {
      // Surface routes answer in their own error shape; chat errors go to the OpenAI error handler.
      if (!ctx.streamSurfaces.has(prepared)) throw err;
      const { status, body } = surface.errorResponse(err);
      return { result: reply.code(status).send(body) };
    }
    if (!upstream.ok) {
      return { result: reply.code(upstream.status).send(surface.upstreamErrorBody(upstream.status, inClientTerms(upstream.json, endpoint, prepared.clientNames))) };
    }
    // From here the gateway writes the response itself; nothing below may throw to fastify.
    reply.hijack();
    try {
      const st = new StreamTrace(endpoint, { clientWantsLogprobs: prepared.clientWantsLogprobs, clientWantsTokenIds: prepared.clientWantsTokenIds });
      let finished = false;
      for await (const data of upstream.events) {
        if (data === "[DONE]") {
          finished = true;
          break;
        }
        let chunk: unknown;
        try {
          chunk = JSON.parse(data);
        } catch {
          throw new BackendProtocolError(backend.name, backend.url, `streamed an event that is not JSON: ${data.slice(0, 200)}`);
        }
        // The engine failed mid-stream: pass its error on in the surface's shape; nothing is recorded.
        if (typeof chunk === "object" && chunk !== null && "error" in chunk) {
          sse.write(surface.fail(new UpstreamStreamError(data, chunk)), true);
          return { result: undefined };
        }
        const visible = readTrace(backend, () => st.push(chunk));
        sse.write(surface.chunk(visible, chunk as StreamChunk));
      }
      if (signal.aborted) throw signal.reason;
      if (!finished) throw new BackendProtocolError(backend.name, backend.url, "ended the event stream without [DONE]");
      const trace = readTrace(backend, () => st.finish());
      // Translated before recording: an answer the surface cannot close is a failed call.
      const closing = surface.finish();
      recordCall(ctx, trace, callId, backend, prepared, place);
      sse.write(closing, true);
      return { trace, result: undefined };
    } catch (err) {
      sse.fail(surface, err);
      return { result: undefined };
    }
  } finally {
    done();
  }
}
