// The HTTP plumbing shared by the token-level adapters: JSON posts to an engine's native endpoints
// and bounded GETs of its /metrics and info pages, with the Backend error contract.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { BackendHttpError, BackendProtocolError, BackendUnreachableError } from "./backend.js";
import { httpBase, httpText, ResponseTooLargeError, type HttpBase, type TextReply } from "./http-text.js";
import { echoingPayload, readEchoing } from "./prompt-echo.js";

export interface EngineHttpOptions {
  name: string;
  /** The url errors name (the backend's configured url). */
  url: string;
  /** Server root the native paths hang off (no trailing slash). */
  root: string;
  clock?: Clock;
  /** Limit for GETs (metrics, info); inference calls are bounded by the caller's signal. */
  probeTimeoutMs?: number;
  /** Limit for operations outside inference (a program's pause or restore, a slot's save), which no caller bounds (default 60 s). */
  adminTimeoutMs?: number;
}

/** EngineHttpOptions.adminTimeoutMs unless given: a pause saves a program's KV, which may take seconds, never a minute. */
export const DEFAULT_ADMIN_TIMEOUT_MS = 60_000;

export interface EngineHttp {
  /** POST JSON to `root + path`; a 2xx JSON answer is returned, anything else thrown as a Backend error. */
  postJson(path: string, body: object, signal?: AbortSignal): Promise<unknown>;
  /**
   * postJson of `{prompt: promptIds, ...rest}` to an endpoint whose answer echoes the prompt's ids in
   * `prompt_token_ids` (vLLM's return_token_ids): the same answer, the echo read from `promptIds` where it
   * holds them exactly as sent (prompt-echo.ts).
   */
  postEchoingPrompt(path: string, promptIds: readonly number[], rest: object, signal?: AbortSignal): Promise<unknown>;
  /**
   * postJson for an operation outside inference (pause, restore, a slot's save): an engine that does not answer
   * within the admin timeout fails it as unreachable, so a wedged engine cannot hold a program's pauses, or the
   * gateway's close, for good.
   */
  postAdmin(path: string, body: object): Promise<unknown>;
  /** GET `root + path` as text within the probe timeout. */
  getText(path: string): Promise<string>;
  /** GET `root + path` as JSON within the probe timeout. */
  getJson(path: string): Promise<unknown>;
}

/** A configured backend url, checked (valid http/https URL) and without trailing slashes. */
export function checkBackendUrl(name: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ArborError(`backend '${name}' url: not a valid URL: '${raw}'`, "config");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new ArborError(`backend '${name}' url: must be http or https, got '${u.protocol}'`, "config");
  }
  return raw.replace(/\/+$/, "");
}

/** Split a configured url into the server root and its OpenAI base (`root/v1`); accepts either form. */
export function splitBaseUrl(name: string, raw: string): { root: string; v1: string } {
  const root = checkBackendUrl(name, raw).replace(/\/v1$/, "");
  return { root, v1: `${root}/v1` };
}

/** The headers of every JSON POST. */
const JSON_HEADERS = { "content-type": "application/json", accept: "application/json" };

/** An engine as its exchanges name it in errors (`name`, its configured `url`) and reach it (`base`). */
export interface EngineTarget {
  name: string;
  url: string;
  base: HttpBase;
}

/**
 * One exchange with an engine (httpText), with the Backend error contract: an aborted exchange rejects with the
 * abort's reason, any other failure as BackendUnreachableError naming the socket's error.
 */
export async function exchange(
  target: EngineTarget,
  method: "GET" | "POST",
  path: string,
  payload: string | undefined,
  headers: Record<string, string>,
  signal?: AbortSignal,
): Promise<TextReply> {
  try {
    return await httpText(target.base, method, path, payload, headers, signal);
  } catch (e) {
    if (signal?.aborted) throw signal.reason ?? e;
    if (e instanceof ResponseTooLargeError) throw new BackendProtocolError(target.name, target.url, e.message);
    throw new BackendUnreachableError(target.name, target.url, describeNetworkError(e));
  }
}

/** Create the HTTP helper of one engine. */
export function createEngineHttp(opts: EngineHttpOptions): EngineHttp {
  const { name, url, root } = opts;
  const clock = opts.clock ?? realClock;
  const probeTimeoutMs = opts.probeTimeoutMs ?? 5_000;
  const adminTimeoutMs = opts.adminTimeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS;

  const target: EngineTarget = { name, url, base: httpBase(root) };

  /** `payload`: the JSON body of a POST, serialized before (see serializeRequestBody); none for a GET. */
  function send(method: "GET" | "POST", path: string, payload: string | undefined, signal?: AbortSignal): Promise<TextReply> {
    return exchange(target, method, path, payload, payload !== undefined ? JSON_HEADERS : {}, signal);
  }

  function failure(path: string, status: number, text: string): BackendHttpError {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return new BackendHttpError(name, url, status, `${path}: ${errorDetail(text)}`, body);
  }

  /** `run` with a signal that fails it as unreachable after `ms` on the clock. */
  async function within<T>(what: string, ms: number, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ac = new AbortController();
    const timer = clock.setTimer(ms, () => ac.abort(new BackendUnreachableError(name, url, `no answer to ${what} within ${ms} ms`)));
    try {
      return await run(ac.signal);
    } finally {
      timer.cancel();
    }
  }

  function probe(path: string): Promise<string> {
    return within(`GET ${path}`, probeTimeoutMs, async (signal) => {
      const r = await send("GET", path, undefined, signal);
      if (r.status < 200 || r.status >= 300) throw failure(`GET ${path}`, r.status, r.text);
      return r.text;
    });
  }

  const parse = (path: string, text: string): unknown => {
    try {
      return JSON.parse(text);
    } catch {
      throw new BackendProtocolError(name, url, `answered ${path} with non-JSON: ${snippet(text)}`);
    }
  };

  async function post(path: string, payload: string, signal?: AbortSignal): Promise<string> {
    const r = await send("POST", path, payload, signal);
    if (r.status < 200 || r.status >= 300) throw failure(`POST ${path}`, r.status, r.text);
    return r.text;
  }

  return {
    // Serialized before the request: a body that cannot be serialized (nested too deep for
    // JSON.stringify) is the client's fault, never a sign that the backend is unreachable.
    async postJson(path, body, signal) {
      return parse(path, await post(path, serializeRequestBody(path, body), signal));
    },
    async postEchoingPrompt(path, promptIds, rest, signal) {
      const { payload, idsJson } = echoingPayload(promptIds, serializeRequestBody(path, rest));
      const text = await post(path, payload, signal);
      return readEchoing(text, idsJson, promptIds) ?? parse(path, text);
    },
    postAdmin(path, body) {
      return within(`POST ${path}`, adminTimeoutMs, async (signal) => parse(path, await post(path, serializeRequestBody(path, body), signal)));
    },
    getText: probe,
    async getJson(path) {
      return parse(path, await probe(path));
    },
  };
}

/** JSON text of a request body; one JSON.stringify cannot handle is an `invalid_request` (HTTP 400 at the gateway). */
export function serializeRequestBody(path: string, body: object): string {
  try {
    return JSON.stringify(body);
  } catch (e) {
    throw new ArborError(`request for ${path} cannot be sent: ${e instanceof Error ? e.message : String(e)} (is it nested too deeply?)`, "invalid_request");
  }
}

/** The error message of an engine's error body: OpenAI/llama.cpp `{error:{message}}`, FastAPI `{detail}`, `{message}`. */
export function errorDetail(text: string): string {
  try {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const j: any = JSON.parse(text);
    const m = j?.error?.message ?? (typeof j?.error === "string" ? j.error : undefined) ?? j?.detail ?? j?.message;
    if (typeof m === "string" && m) return snippet(m);
  } catch {
    // not JSON: show the text itself
  }
  return snippet(text) || "(empty body)";
}

function snippet(text: string): string {
  return text.slice(0, 200).replace(/\s+/g, " ").trim();
}

/** One line for a fetch failure: undici hides the socket error (ECONNREFUSED...) in `cause`. */
export function describeNetworkError(e: unknown): string {
  let err: unknown = e;
  // fetch wraps the socket error: TypeError("fetch failed", { cause }).
  while (err instanceof Error && err.cause !== undefined && err.message === "fetch failed") err = err.cause;
  if (err instanceof AggregateError && err.errors.length > 0 && !err.message) err = err.errors[0];
  if (err instanceof Error) {
    const ne = err as NodeJS.ErrnoException;
    const msg = err.message || (ne.code ? `${ne.syscall ?? "connect"} ${ne.code}` : err.name);
    return msg.replace(/\s+/g, " ").trim();
  }
  return String(err).replace(/\s+/g, " ").trim();
}
