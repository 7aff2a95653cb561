// Errors of the Anthropic Messages surface, in Anthropic's wire shape
// (`{type:"error", error:{type, message}}`) so @anthropic-ai/sdk clients raise their typed errors.
import { ArborError } from "../../core/errors.js";

export type AnthropicErrorType = "invalid_request_error" | "api_error" | "not_found_error" | "overloaded_error";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: AnthropicErrorType; message: string };
}

// The gateway-wide ArborError codes, so an OpenAI-style handler that meets this error still answers sensibly.
const arborCode: Record<AnthropicErrorType, string> = {
  invalid_request_error: "invalid_request",
  api_error: "backend_protocol",
  not_found_error: "program_unknown",
  overloaded_error: "capacity",
};

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
