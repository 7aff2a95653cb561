// Writing a streamed answer (server-sent events) straight to the client's socket once the gateway
// has taken the response from fastify: the headers on the first frame, nothing after the client left.
import type { ServerResponse } from "node:http";
import type { StreamSurface } from "./surfaces/stream-surface.js";

export interface SseResponse {
  /** Whether the client's side is closed (nothing more can be written). */
  gone(): boolean;
  /** Write frames, the SSE headers first if none went yet; `end` closes the response. */
  write(frames: string, end?: boolean): void;
  /** End a failed stream: a status and error body before any frame, else the surface's error event. */
  fail(surface: StreamSurface, err: unknown): void;
}

/** An SSE writer for call `callId` (index `index` of its program) on `res`. */
export function sseResponse(res: ServerResponse, callId: string, index: number): SseResponse {
  const gone = (): boolean => res.destroyed || res.writableEnded;
  const write = (frames: string, end = false): void => {
    if (gone()) return;
    if (!res.headersSent) {
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        connection: "keep-alive",
        "x-accel-buffering": "no",
        "x-arbor-call-id": callId,
        "x-arbor-call-index": String(index),
      });
    }
    if (end) res.end(frames);
    else if (frames !== "") res.write(frames);
  };
  return {
    gone,
    write,
    fail(surface, err) {
      if (gone()) return;
      if (!res.headersSent) {
        const { status, body } = surface.errorResponse(err);
        res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
        res.end(JSON.stringify(body));
      } else {
        write(surface.fail(err), true);
      }
    },
  };
}
