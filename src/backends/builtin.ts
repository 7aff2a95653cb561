// Adapter for Arbor's built-in engine: a vLLM-compatible OpenAI API (token ids, logprobs and
// policy_version in every answer), reached through undici's pool (http-text.ts).
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { BackendProtocolError, BackendUnreachableError, type BackendReply } from "./backend.js";
import { checkBackendUrl, describeNetworkError, exchange, serializeRequestBody, type EngineTarget } from "./engine-http.js";
import { httpBase } from "./http-text.js";
import { postSse, type StreamingBackend } from "./sse.js";

export interface BuiltinBackendOptions {
  name: string;
  /** Base URL ending in /v1, e.g. http://127.0.0.1:8000/v1. */
  url: string;
  clock?: Clock;
  /** Limit for health() and models(); inference calls are bounded by the caller's signal. */
  probeTimeoutMs?: number;
  /**
   * The model name the engine serves. When set, every chat/completions body goes upstream with it,
   * whatever `model` the client sent: black-box agents name their own models, and the call belongs
   * to the program's policy, not to the name. Unset = the client's name goes through, unless
   * `discoverModel`.
   */
  model?: string;
  /**
   * Without `model`: read the engine's served names from GET /models once, and send a client's
   * name that is not among them as the first one (vLLM, SGLang, Arbor's engine: one policy each).
   */
  discoverModel?: boolean;
}

/** Create a {@link StreamingBackend} for a built-in (vLLM-compatible) engine. */
export function createBuiltinBackend(opts: BuiltinBackendOptions): StreamingBackend {
  const name = opts.name;
  if (!name) throw new ArborError("backend name: must not be empty", "config");
  const url = checkBackendUrl(name, opts.url);
  const clock = opts.clock ?? realClock;
  const probeTimeoutMs = opts.probeTimeoutMs ?? 5_000;

  const target: EngineTarget = { name, url, base: httpBase(url) };

  async function send(method: "GET" | "POST", path: string, body?: object, signal?: AbortSignal): Promise<BackendReply> {
    // A body that cannot be serialized is the client's fault, not an unreachable backend: thrown before sending.
    const payload = body ? serializeRequestBody(path, body) : undefined;
    // Not fetch: undici's pool at a fraction of fetch's CPU per call (http-text.ts).
    const { status, text } = await exchange(target, method, path, payload, body ? { "content-type": "application/json", accept: "application/json" } : { accept: "application/json" }, signal);
    try {
      return { status, json: JSON.parse(text) };
    } catch {
      const snippet = text.slice(0, 200).replace(/\s+/g, " ").trim();
      if (status >= 200 && status < 300) throw new BackendProtocolError(name, url, `answered ${path} with non-JSON: ${snippet}`);
      // Keep the upstream status; give the client an OpenAI-shaped error it can parse.
      return {
        status,
        json: {
          error: {
            message: `backend '${name}' answered HTTP ${status}: ${snippet || "(empty body)"}`,
            type: "upstream_error",
            param: null,
            code: null,
          },
        },
      };
    }
  }

  async function probe(): Promise<BackendReply> {
    const ac = new AbortController();
    const timer = clock.setTimer(probeTimeoutMs, () =>
      ac.abort(new BackendUnreachableError(name, url, `no answer within ${probeTimeoutMs} ms`)),
    );
    try {
      return await send("GET", "/models", undefined, ac.signal);
    } finally {
      timer.cancel();
    }
  }

  const served = opts.model;
  if (served !== undefined && (served === "" || served.length > 256)) throw new ArborError(`backend '${name}' model: must be 1-256 characters`, "config");
  let servedList: Promise<string[]> | undefined;
  const listServed = async (): Promise<string[]> => {
    const r = await probe();
    const ids: unknown[] = r.status === 200 && Array.isArray(r.json?.data) ? r.json.data.map((m: { id?: unknown }) => m?.id) : [];
    return ids.filter((id): id is string => typeof id === "string" && id !== "");
  };
  const asServed = async (body: object): Promise<object> => {
    if (served !== undefined) return { ...body, model: served };
    if (!opts.discoverModel) return body;
    // A failed listing is not cached: the next call asks again.
    const ids = await (servedList ??= listServed().catch((e: unknown) => {
      servedList = undefined;
      throw e;
    }));
    const asked = (body as { model?: unknown }).model;
    if (ids.length === 0 || (typeof asked === "string" && ids.includes(asked))) return body;
    return { ...body, model: ids[0] };
  };
  return {
    name,
    url,
    ...(served !== undefined ? { servedModel: served } : {}),
    chatCompletions: async (body, signal) => send("POST", "/chat/completions", await asServed(body), signal),
    completions: async (body, signal) => send("POST", "/completions", await asServed(body), signal),
    chatCompletionsStream: async (body, signal) => postSse({ name, url, describeError: describeNetworkError }, `${url}/chat/completions`, await asServed(body), signal),
    completionsStream: async (body, signal) => postSse({ name, url, describeError: describeNetworkError }, `${url}/completions`, await asServed(body), signal),
    async models() {
      const r = await probe();
      if (r.status !== 200) throw new BackendProtocolError(name, url, `answered GET /models with HTTP ${r.status}`);
      return r.json;
    },
    async health() {
      const r = await probe();
      if (r.status !== 200) {
        const msg = typeof r.json?.error?.message === "string" ? `: ${r.json.error.message}` : "";
        throw new ArborError(`backend '${name}' at ${url} is not healthy: HTTP ${r.status}${msg}`, "backend_unhealthy");
      }
    },
  };
}
