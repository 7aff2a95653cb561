// Time and connection bounds of Arbor's HTTP servers (gateway, engine). Fastify sets no request
// timeout by default, so a client that sends headers with `Content-Length: 1000` and then nothing
// held its socket for good; thousands of such sockets were held. Node's http server can bound the
// time to receive a request's headers and body (`headersTimeout`, `requestTimeout`: only requests
// still arriving are timed, so long generations are unaffected) and the open connections
// (`maxConnections`); this module turns one config into fastify's options for that, and answers a
// timed-out request with 408 and an error object that says which limit it hit.
import type { Socket } from "node:net";
import { ArborError } from "./errors.js";

/** Bounds of one HTTP server. */
export interface HttpLimits {
  /** Time to receive a whole request (headers and body), ms; past it → 408 and the socket is closed. */
  requestTimeoutMs: number;
  /** Time to receive a request's headers, ms (at most requestTimeoutMs). */
  headersTimeoutMs: number;
  /** Open connections at most; further connections are closed at once. */
  maxConnections: number;
}

/** Defaults: a 32 MiB body arrives in a minute over any link an agent uses; 4096 sockets stay far below fd limits. */
export const DEFAULT_HTTP_LIMITS: HttpLimits = { requestTimeoutMs: 60_000, headersTimeoutMs: 20_000, maxConnections: 4096 };

/** Fill in defaults and check each bound (integers >= 1); `owner` prefixes config errors (e.g. `gateway`). */
export function resolveHttpLimits(given: Partial<HttpLimits> | undefined, owner: string): HttpLimits {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...given };
  for (const key of ["requestTimeoutMs", "headersTimeoutMs", "maxConnections"] as const) {
    const v = limits[key];
    if (!(Number.isInteger(v) && v >= 1)) throw new ArborError(`${owner} httpLimits.${key}: must be an integer >= 1, got ${v}`, "config");
  }
  // Node refuses a headers timeout above the request timeout.
  limits.headersTimeoutMs = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  return limits;
}

/** An error body in the server's own shape, for a request refused before any route saw it. */
export type ClientErrorBody = (status: number, message: string, code: string) => object;

/** The fastify constructor options that enforce `limits` (pass {@link limitConnections} the server after). */
export function fastifyHttpLimitOptions(limits: HttpLimits, body: ClientErrorBody) {
  return {
    requestTimeout: limits.requestTimeoutMs,
    http: {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      // Node looks for expired requests this often (its default, 30 s, would let short limits run long).
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
    },
    clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
      if (err.code === "ECONNRESET" || socket.destroyed) return;
      const [status, message, code] =
        err.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? [408, `request timeout: headers must arrive within ${limits.headersTimeoutMs} ms and the whole request within ${limits.requestTimeoutMs} ms`, "request_timeout"]
          : err.code === "HPE_HEADER_OVERFLOW"
            ? [431, "request headers are larger than the server's limit", "headers_too_large"]
            : [400, `malformed HTTP request (${err.code ?? err.message})`, "malformed_http"];
      const text = JSON.stringify(body(status, message, code));
      const reason = status === 408 ? "Request Timeout" : status === 431 ? "Request Header Fields Too Large" : "Bad Request";
      if (socket.writable) {
        socket.write(
          `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
        );
      }
      socket.destroy();
    },
  };
}

/** Bound the server's open connections (Node closes the ones beyond at once). */
export function limitConnections(server: { maxConnections: number }, limits: HttpLimits): void {
  server.maxConnections = limits.maxConnections;
}
