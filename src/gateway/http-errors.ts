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

/** Map any thrown value to an HTTP status and OpenAI-shaped body; unknown errors are 500s. */
export function toOpenAiError(err: unknown): { status: number; body: OpenAiErrorBody } {
  if (err instanceof ArborError) {
    const status = statusByCode[err.code] ?? 500;
    const param = err instanceof InvalidRequestError ? err.param : null;
    return { status, body: openAiError(err.message, err.code, param) };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { status: 500, body: openAiError(`gateway internal error: ${message}`, "internal_error") };
}

/** Build an OpenAI-shaped error body. */
export function openAiError(message: string, type: string, param: string | null = null): OpenAiErrorBody {
  return { error: { message, type, param, code: type } };
}
