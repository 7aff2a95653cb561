// Streamed (SSE) inference calls to an OpenAI-compatible engine: the request is POSTed with the
// Backend error contract, and a 2xx event stream is read back as the raw `data:` payloads in order.
import { BackendProtocolError, BackendUnreachableError, type Backend } from "./backend.js";
import { serializeRequestBody } from "./engine-http.js";
import { SseSplitter } from "../core/sse-splitter.js";

/** A streamed call's answer: the event stream on 2xx, else the upstream's error status and JSON body. */
export type BackendStreamReply =
  | { ok: true; status: number; events: AsyncIterable<string> }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  | { ok: false; status: number; json: any };

/** A {@link Backend} that can also stream (`stream: true` requests). */
export interface StreamingBackend extends Backend {
  /**
   * POST {url}/chat/completions with a `stream: true` body. An error answer (non-2xx) is returned;
   * `events` yields each event's data (JSON text, `[DONE]` last when the engine finished) and throws
   * {@link BackendUnreachableError} when the connection breaks, `signal.reason` when aborted.
   */
  chatCompletionsStream(body: object, signal?: AbortSignal): Promise<BackendStreamReply>;
  /** POST {url}/completions streamed, with the contract of {@link StreamingBackend.chatCompletionsStream}. */
  completionsStream(body: object, signal?: AbortSignal): Promise<BackendStreamReply>;
}

/** Whether a backend implements the streaming methods. */
export function isStreamingBackend(b: Backend): b is StreamingBackend {
  const s = b as Partial<StreamingBackend>;
  return typeof s.chatCompletionsStream === "function" && typeof s.completionsStream === "function";
}

export interface SsePostOptions {
  name: string;
  url: string;
  describeError: (e: unknown) => string;
}

/** POST a JSON body to `target` and open its event stream; see {@link StreamingBackend}. */
export async function postSse(opts: SsePostOptions, target: string, body: object, signal?: AbortSignal): Promise<BackendStreamReply> {
  const { name, url } = opts;
  const fail = (e: unknown): unknown => (signal?.aborted ? (signal.reason ?? e) : new BackendUnreachableError(name, url, opts.describeError(e)));
  let res: Response;
  // Outside the try: a body that cannot be serialized is the client's fault, not an unreachable backend.
  const payload = serializeRequestBody(target, body);
  try {
    res = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: payload,
      signal,
    });
  } catch (e) {
    throw fail(e);
  }
  const type = res.headers.get("content-type") ?? "";
  if (res.ok && type.includes("text/event-stream") && res.body) {
    return { ok: true, status: res.status, events: sseData(res.body, fail, { name, url }) };
  }
  let text: string;
  try {
    text = await res.text();
  } catch (e) {
    throw fail(e);
  }
  const snippet = text.slice(0, 200).replace(/\s+/g, " ").trim();
  if (res.ok) throw new BackendProtocolError(name, url, `answered a streamed request with '${type || "no content type"}' instead of an event stream: ${snippet}`);
  try {
    return { ok: false, status: res.status, json: JSON.parse(text) };
  } catch {
    return {
      ok: false,
      status: res.status,
      json: { error: { message: `backend '${name}' answered HTTP ${res.status}: ${snippet || "(empty body)"}`, type: "upstream_error", param: null, code: null } },
    };
  }
}

/**
 * The `data:` payloads of an event stream, one per event (multi-line data joined with "\n");
 * comments and other fields are skipped. Read errors are mapped through `fail`; an event over
 * `maxEventChars` ends the stream with a {@link BackendProtocolError} (an engine never sends one).
 */
export async function* sseData(
  body: ReadableStream<Uint8Array>,
  fail: (e: unknown) => unknown = (e) => e,
  opts: { name?: string; url?: string; maxEventChars?: number } = {},
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  const ready: string[] = [];
  const splitter = new SseSplitter({
    maxEventChars: opts.maxEventChars,
    onData: (data) => ready.push(data),
    onOversized: (max) => {
      throw new BackendProtocolError(opts.name ?? "backend", opts.url ?? "", `sent an event stream event over ${max} characters`);
    },
  });
  try {
    for (;;) {
      const chunk = await reader.read().catch((e: unknown) => {
        throw fail(e);
      });
      if (chunk.done) {
        splitter.push(decoder.decode());
        splitter.end();
      } else splitter.push(decoder.decode(chunk.value, { stream: true }));
      // Yield outside the splitter's callback: the consumer may stop (return) at any event.
      for (const data of ready.splice(0)) yield data;
      if (chunk.done) return;
    }
  } finally {
    // Stop the download when the consumer stops early (the engine sees the connection close).
    reader.cancel().catch(() => undefined);
  }
}
