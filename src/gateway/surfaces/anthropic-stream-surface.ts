// The Anthropic Messages surface of a streamed answer: engine chat chunks become message_start,
// ping, content_block_* (text_delta, input_json_delta), message_delta and message_stop events;
// failures become Anthropic's `error` event (after the stream began) or error body (before).
import { toOpenAiError } from "../http-errors.js";
import { AnthropicError, anthropicErrorType } from "./anthropic-error.js";
import { anthropicErrorEvent, ChatChunkToAnthropicEvents, formatAnthropicSse, type ChatChunkLike } from "./anthropic-stream.js";
import type { AnthropicStreamEvent } from "./anthropic-types.js";
import { upstreamErrorMessage, UpstreamStreamError, type StreamSurface } from "./stream-surface.js";

/** A streamed /v1/messages answer for a request that named `model`. */
export function anthropicStreamSurface(model: string): StreamSurface {
  let conv: ChatChunkToAnthropicEvents | undefined;
  const frames = (events: AnthropicStreamEvent[]): string =>
    events
      // Anthropic sends a ping right after message_start; clients skip it, proxies see traffic.
      .flatMap((e) => (e.type === "message_start" ? [formatAnthropicSse(e), formatAnthropicSse({ type: "ping" })] : [formatAnthropicSse(e)]))
      .join("");
  return {
    chunk(visible, raw) {
      // message_start announces the prompt's size: the engine's prompt ids arrive with its first chunk.
      const prompt = raw.prompt_token_ids;
      conv ??= new ChatChunkToAnthropicEvents(model, Array.isArray(prompt) ? prompt.length : 0);
      return frames(conv.push(visible as ChatChunkLike));
    },
    finish() {
      conv ??= new ChatChunkToAnthropicEvents(model);
      return frames(conv.finish());
    },
    fail: (err) => formatAnthropicSse(anthropicErrorEvent(toAnthropicError(err))),
    errorResponse(err) {
      const e = toAnthropicError(err);
      return { status: e.status, body: e.body };
    },
    upstreamErrorBody: (status, json) => new AnthropicError(status, anthropicErrorType(status), upstreamErrorMessage(json)).body,
  };
}

/** Any gateway failure as an AnthropicError, keeping its status and message. */
export function toAnthropicError(err: unknown): AnthropicError {
  if (err instanceof AnthropicError) return err;
  if (err instanceof UpstreamStreamError) return new AnthropicError(502, "api_error", `upstream engine failed mid-stream: ${err.message}`);
  const { status, body } = toOpenAiError(err);
  return new AnthropicError(status, anthropicErrorType(status), body.error.message);
}
