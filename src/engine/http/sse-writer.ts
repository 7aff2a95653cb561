// Server-sent events on a raw Node response, as OpenAI and vLLM stream: `data: {json}\n\n` per
// chunk, `data: [DONE]\n\n` last. Headers go out with the first chunk, so an error before any
// token (a full queue, a refused prompt) can still be answered as a plain JSON error.
import type { ServerResponse } from "node:http";
import type { HttpError } from "../openai-errors.js";

/** Writes one event stream; every write is a no-op once the client has gone. */
export class SseWriter {
  private started = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly headers: Record<string, string>,
  ) {}

  /** Whether the 200 and the first event have been written. */
  get hasStarted(): boolean {
    return this.started;
  }

  /** The connection is gone or the stream is finished. */
  get closed(): boolean {
    return this.res.destroyed || this.res.writableEnded;
  }

  /** Send one `data:` event. */
  send(data: unknown): void {
    if (this.closed) return;
    this.head();
    this.res.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** End the stream with `data: [DONE]`. */
  done(): void {
    if (this.closed) return;
    this.head();
    this.res.end("data: [DONE]\n\n");
  }

  private head(): void {
    if (this.started) return;
    this.started = true;
    this.res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
      ...this.headers,
    });
  }

  /**
   * Report a failure: before the first event as a plain JSON error with its status; after it as
   * an `error` event followed by [DONE] (vLLM's streaming error shape).
   */
  fail(err: HttpError): void {
    if (this.closed) return;
    if (!this.started) {
      this.started = true;
      this.res.writeHead(err.status, { "content-type": "application/json; charset=utf-8", ...this.headers, ...err.headers });
      this.res.end(JSON.stringify(err.body()));
      return;
    }
    this.send({ error: { ...err.body().error, code: err.status } });
    this.done();
  }
}
