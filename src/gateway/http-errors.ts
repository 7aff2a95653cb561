// Gateway errors in the OpenAI error shape: every failure a client sees is
// `{ error: { message, type, param, code } }` with a status that says who is at fault.
import { ArborError } from "../core/errors.js";

/** The client sent something the gateway cannot serve (HTTP 400), naming the field. */
export class InvalidRequestError extends ArborError {
  constructor(
    readonly param: string | null,
    reason: string,
  ) {
    super(param ? `${param}: ${reason}` : reason, "invalid_request");
  }
}

/** The backend did not answer within the call timeout (HTTP 504). */
export class CallTimeoutError extends ArborError {
  constructor(backend: string, ms: number) {
    super(`backend '${backend}' did not answer within ${ms} ms`, "timeout");
  }
}

/** The client closed its connection before the answer (the upstream call is aborted). */
export class ClientClosedError extends ArborError {
  constructor() {
    super("client closed the connection before the answer", "client_closed");
  }
}

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const statusByCode: Record<string, number> = {
  invalid_request: 400,
  program_unknown: 404,
  program_released: 409,
  program_exists: 409,
  capacity: 429,
  backend_unreachable: 502,
  backend_protocol: 502,
  timeout: 504,
  // nginx's convention for "client went away"; nobody reads it, but logs stay truthful.
  client_closed: 499,
  record_failed: 500,
};

/**
 * OpenAI's error `type` for a status: what OpenAI itself sends (`invalid_request_error` for client
 * mistakes, 401 included; `requests` for request-rate and capacity 429s; `server_error` for 5xx).
 * The Arbor code (`program_released`, `capacity`, …) goes in `code`.
 */
export function openAiErrorType(status: number): string {
  if (status === 403) return "permission_error";
  if (status === 429) return "requests";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/** Seconds a client should wait after a capacity 429 (a slot frees when any program ends; no better estimate exists). */
export const CAPACITY_RETRY_AFTER_S = 1;

/** Map any thrown value to an HTTP status, OpenAI-shaped body and headers (`retry-after` on 429); unknown errors are 500s. */
export function toOpenAiError(err: unknown): { status: number; body: OpenAiErrorBody; headers: Record<string, string> } {
  if (err instanceof ArborError) {
    const status = statusByCode[err.code] ?? 500;
    const param = err instanceof InvalidRequestError ? err.param : null;
    const headers: Record<string, string> = status === 429 ? { "retry-after": String(CAPACITY_RETRY_AFTER_S) } : {};
    return { status, body: openAiError(err.message, openAiErrorType(status), param, err.code), headers };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { status: 500, body: openAiError(`gateway internal error: ${message}`, "server_error", null, "internal_error"), headers: {} };
}

/** Build an OpenAI-shaped error body (`code` defaults to null, as OpenAI sends for most errors). */
export function openAiError(message: string, type: string, param: string | null = null, code: string | null = null): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}
