// The bounded HTTP requests a weight loader sends to an engine's admin routes (server root, no /v1): every
// request ends within the loader's timeout, and every failure is one ArborError (code "weight_sync") that names
// the engine, its url, the route and why (unreachable, no answer in time, or the engine's own message).
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { realClock } from "../../core/real-clock.js";
import { describeNetworkError, errorDetail, splitBaseUrl } from "../engine-http.js";

export interface AdminHttpOptions {
  /** Engine name errors carry. */
  name: string;
  /** Configured url (with or without /v1); admin routes hang off its server root. */
  url: string;
  /** Limit for one request, ms. */
  timeoutMs: number;
  /** Sent as `Authorization: Bearer` (SGLang --api-key / --admin-api-key, vLLM --api-key). */
  apiKey?: string;
  clock?: Clock;
}

/** One answer: status and raw text (JSON parsed where it is JSON). */
export interface AdminAnswer {
  status: number;
  text: string;
  json: unknown;
}

/** Why a request did not get an answer (the caller decides whether a retry is safe). */
export type AdminFailure = "unreachable" | "timeout";

/** A transport failure or timeout: no HTTP answer came back. */
export class AdminTransportError extends ArborError {
  constructor(
    message: string,
    readonly failure: AdminFailure,
  ) {
    super(message, "weight_sync");
  }
}

export interface AdminHttp {
  /** Server root (no trailing slash, no /v1). */
  readonly root: string;
  /** Send one request; resolves with any HTTP answer, rejects with an AdminTransportError when there is none. */
  send(method: "GET" | "POST", path: string, body?: object): Promise<AdminAnswer>;
  /** Like `send`, but a non-2xx answer rejects with an ArborError carrying the engine's message. */
  ok(method: "GET" | "POST", path: string, body?: object, what?: string): Promise<AdminAnswer>;
  /** The ArborError for a non-2xx answer to `what`. */
  refused(what: string, a: AdminAnswer): ArborError;
}

/** Create the admin HTTP helper of one engine. */
export function createAdminHttp(opts: AdminHttpOptions): AdminHttp {
  const { name, url, timeoutMs } = opts;
  const clock = opts.clock ?? realClock;
  const { root } = splitBaseUrl(name, url);
  const label = `engine ${name} (${url})`;

  async function send(method: "GET" | "POST", path: string, body?: object): Promise<AdminAnswer> {
    const ac = new AbortController();
    // Bounded: an engine that accepted the connection but never answers (a hung load) must not hold the switch.
    const timer = clock.setTimer(timeoutMs, () => ac.abort());
    try {
      const headers: Record<string, string> = { accept: "application/json" };
      if (body) headers["content-type"] = "application/json";
      if (opts.apiKey !== undefined) headers.authorization = `Bearer ${opts.apiKey}`;
      const res = await fetch(root + path, {
        method,
        headers,
        body: body ? JSON.stringify(body) : undefined,
        signal: ac.signal,
      });
      const text = await res.text();
      return { status: res.status, text, json: parseJson(text) };
    } catch (e) {
      if (ac.signal.aborted) {
        throw new AdminTransportError(`weight sync: ${label} gave no answer to ${method} ${path} within ${timeoutMs} ms`, "timeout");
      }
      throw new AdminTransportError(`weight sync: ${label} unreachable for ${method} ${path}: ${describeNetworkError(e)}`, "unreachable");
    } finally {
      timer.cancel();
    }
  }

  const refused = (what: string, a: AdminAnswer): ArborError =>
    new ArborError(`weight sync: ${label} refused ${what} (HTTP ${a.status}): ${errorDetail(a.text)}`, "weight_sync");

  return {
    root,
    send,
    refused,
    async ok(method, path, body, what) {
      const a = await send(method, path, body);
      if (a.status < 200 || a.status >= 300) throw refused(what ?? `${method} ${path}`, a);
      return a;
    },
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
