// Errors of the Anthropic Messages surface, in Anthropic's wire shape
// (`{type:"error", error:{type, message}}`) so @anthropic-ai/sdk clients raise their typed errors.
import { ArborError } from "../../core/errors.js";

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "overloaded_error";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: AnthropicErrorType; message: string };
}

// The gateway-wide ArborError codes, so an OpenAI-style handler that meets this error still answers sensibly.
const arborCode: Record<AnthropicErrorType, string> = {
  invalid_request_error: "invalid_request",
  authentication_error: "invalid_api_key",
  permission_error: "forbidden",
  not_found_error: "program_unknown",
  request_too_large: "invalid_request",
  rate_limit_error: "capacity",
  api_error: "backend_protocol",
  overloaded_error: "capacity",
};

const typeByStatus: Record<number, AnthropicErrorType> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
  529: "overloaded_error",
};

/** Anthropic's error type for an HTTP status (its documented table; other 4xx are invalid requests, other 5xx API errors). */
export function anthropicErrorType(status: number): AnthropicErrorType {
  return typeByStatus[status] ?? (status < 500 ? "invalid_request_error" : "api_error");
}

/**
 * An error body any part of the gateway produced (OpenAI's `{error:{message}}`, fastify's
 * `{message}`, or already Anthropic's) in Anthropic's shape, keeping the message; undefined when
 * `body` is no error body.
 */
export function asAnthropicErrorBody(status: number, body: unknown): AnthropicErrorBody | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const b = body as { type?: unknown; error?: unknown; message?: unknown };
  if (b.type === "error" && typeof b.error === "object" && b.error !== null) return body as AnthropicErrorBody;
  const inner = typeof b.error === "object" && b.error !== null ? (b.error as { message?: unknown }).message : undefined;
  const message = typeof inner === "string" ? inner : typeof b.message === "string" ? b.message : typeof b.error === "string" ? b.error : undefined;
  if (message === undefined) return undefined;
  return { type: "error", error: { type: anthropicErrorType(status), message } };
}

/** An error to answer an Anthropic client with: an HTTP status and Anthropic's error body. */
export class AnthropicError extends ArborError {
  readonly body: AnthropicErrorBody;

  constructor(
    readonly status: number,
    type: AnthropicErrorType,
    message: string,
  ) {
    super(message, arborCode[type]);
    this.name = "AnthropicError";
    this.body = { type: "error", error: { type, message } };
  }

  /** A 400 naming the offending field, e.g. `messages.1.content.0.tool_use_id: Field required`. */
  static invalidRequest(field: string | null, reason: string): AnthropicError {
    return new AnthropicError(400, "invalid_request_error", field ? `${field}: ${reason}` : reason);
  }

  /** A 502: the upstream engine answered something this surface cannot translate. */
  static upstream(reason: string): AnthropicError {
    return new AnthropicError(502, "api_error", `upstream answer cannot be translated: ${reason}`);
  }
}
