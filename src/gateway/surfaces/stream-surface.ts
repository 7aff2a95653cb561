// How a streamed chat answer reaches the client of one API surface. The gateway's relay reads the
// engine's chat.completion.chunk events (or, on the token path, builds them from the engine's token
// deltas), traces them, and hands each to the surface, which writes
// its own SSE events: OpenAI chunks as they are (chat, completions), Anthropic message events, or
// Responses events. Failures end the stream in the surface's own error shape.
import { toOpenAiError } from "../http-errors.js";

export type StreamChunk = Record<string, unknown>;

/** The engine sent its own error event mid-stream: `data` is that event, as sent. */
export class UpstreamStreamError extends Error {
  /** `data` is the event as sent; `chunk` its parsed JSON (`{error: {message, ...}}`). */
  constructor(
    readonly data: string,
    chunk: object,
  ) {
    const message = (chunk as { error?: { message?: unknown } }).error?.message;
    super(typeof message === "string" ? message : `upstream error: ${data.slice(0, 200)}`);
    this.name = "UpstreamStreamError";
  }
}

/** One streamed answer's writer; a new one per call (surfaces keep per-answer state). */
export interface StreamSurface {
  /** SSE frames for one chunk: `visible` is what this client may see of it, `raw` what the engine sent. */
  chunk(visible: StreamChunk, raw: StreamChunk): string;
  /**
   * The frames that end a complete answer. Called before the call is recorded: a throw (an answer
   * the surface cannot translate) fails the stream instead, and nothing is recorded.
   */
  finish(): string;
  /** The frames that end a stream failing after it began (headers sent), terminator included. */
  fail(err: unknown): string;
  /** The status and JSON body answering a failure before the stream began. */
  errorResponse(err: unknown): { status: number; body: unknown };
  /** The body relaying the engine's own (OpenAI-shaped) error answer of `status`, sent before any event. */
  upstreamErrorBody(status: number, json: unknown): unknown;
}

/** One `data:` frame. */
export function dataFrame(data: string): string {
  return `data: ${data}\n\n`;
}

/** OpenAI's chat and text completions: chunks relayed as the client may see them, `[DONE]` last. */
export function openAiStreamSurface(): StreamSurface {
  return {
    chunk: (visible) => dataFrame(JSON.stringify(visible)),
    finish: () => dataFrame("[DONE]"),
    fail(err) {
      if (err instanceof UpstreamStreamError) return dataFrame(err.data) + dataFrame("[DONE]");
      const { status, body } = toOpenAiError(err);
      return dataFrame(JSON.stringify({ error: { ...body.error, code: status } })) + dataFrame("[DONE]");
    },
    errorResponse: (err) => toOpenAiError(err),
    upstreamErrorBody: (_status, json) => json,
  };
}

/** The message of an OpenAI-shaped error body (`{error: {message}}`), or the body itself as text. */
export function upstreamErrorMessage(json: unknown): string {
  const message = (json as { error?: { message?: unknown } } | null)?.error?.message;
  return typeof message === "string" ? message : JSON.stringify(json);
}
