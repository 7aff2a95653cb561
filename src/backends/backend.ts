// The Backend interface: how the gateway speaks to one inference engine over HTTP. Adapters only
// translate transport; routing, pausing and tracing live in the gateway.
import { ArborError } from "../core/errors.js";

/** An upstream answer as received: the HTTP status and the parsed JSON body (errors included). */
export interface BackendReply {
  status: number;
  // The shape depends on the endpoint and the engine; the gateway validates what it uses.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export interface Backend {
  readonly name: string;
  /** Base URL of the OpenAI-compatible API, ending in /v1 (no trailing slash). */
  readonly url: string;
  /**
   * POST {url}/chat/completions. Upstream errors (4xx/5xx with a JSON body) are returned, not thrown.
   * Throws {@link BackendUnreachableError} when the engine cannot be reached, `signal.reason` when aborted.
   */
  chatCompletions(body: object, signal?: AbortSignal): Promise<BackendReply>;
  /** POST {url}/completions, with the same error contract as {@link Backend.chatCompletions}. */
  completions(body: object, signal?: AbortSignal): Promise<BackendReply>;
  /** GET {url}/models: the engine's model list. Throws an ArborError when unreachable or not 200. */
  models(): Promise<unknown>;
  /** Resolves when the engine answers; throws an ArborError naming the backend, url and cause. */
  health(): Promise<void>;
}

/** The engine could not be reached (connection refused, DNS failure, reset...). */
export class BackendUnreachableError extends ArborError {
  constructor(
    readonly backend: string,
    readonly url: string,
    cause: string,
  ) {
    super(`backend '${backend}' at ${url} is not reachable: ${cause}`, "backend_unreachable");
  }
}

/** The engine answered, but not in a shape Arbor can use (non-JSON, missing token ids...). */
export class BackendProtocolError extends ArborError {
  constructor(
    readonly backend: string,
    readonly url: string,
    problem: string,
  ) {
    super(`backend '${backend}' at ${url} ${problem}`, "backend_protocol");
  }
}
