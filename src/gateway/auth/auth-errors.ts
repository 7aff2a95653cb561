// Rejections of the gateway's security layer (credentials, limits): each carries its own HTTP status,
// OpenAI error type/code and headers, so the HTTP shell sends them exactly as OpenAI would.
import { ArborError } from "../../core/errors.js";

/** A request the gateway refuses before any upstream work (401, 403, 409, 429, ...). */
export class GatewayRejection extends ArborError {
  constructor(
    readonly status: number,
    /** OpenAI error `type`, e.g. `invalid_request_error`, `permission_error`, `requests`. */
    readonly type: string,
    /** OpenAI error `code`, e.g. `invalid_api_key`, `rate_limit_exceeded`. */
    code: string,
    message: string,
    /** Extra response headers, e.g. `retry-after`. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message, code);
  }

  /** The OpenAI-shaped body `{ error: { message, type, param, code } }`. */
  body(): { error: { message: string; type: string; param: null; code: string } } {
    return { error: { message: this.message, type: this.type, param: null, code: this.code } };
  }
}

/** No credential, or one that matches no key and no admin token (HTTP 401). */
export function unauthenticated(reason: string): GatewayRejection {
  return new GatewayRejection(401, "invalid_request_error", "invalid_api_key", reason, { "www-authenticate": "Bearer" });
}

/** A valid credential that does not reach this resource (HTTP 403). */
export function forbidden(reason: string): GatewayRejection {
  return new GatewayRejection(403, "permission_error", "forbidden", reason);
}

/** A per-program limit was hit (HTTP 429); `retryAfterMs` becomes a `retry-after` header in whole seconds. */
export function rateLimited(reason: string, retryAfterMs?: number): GatewayRejection {
  const headers: Record<string, string> =
    retryAfterMs === undefined ? {} : { "retry-after": String(Math.max(1, Math.ceil(retryAfterMs / 1000))) };
  return new GatewayRejection(429, "requests", "rate_limit_exceeded", reason, headers);
}
