// OpenAI-style HTTP errors: `{error: {message, type, param, code}}` with a status code, so clients
// (the OpenAI SDK, the gateway) show the field and the reason.
import type { z } from "zod";

/** An error the HTTP layer answers as-is. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    /** Extra response headers, e.g. `retry-after` on a 429. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = "HttpError";
  }

  /** The response body in OpenAI's error shape. */
  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 400 naming the offending request field. */
export function invalidRequest(param: string | null, reason: string, code: string | null = null): HttpError {
  return new HttpError(400, param ? `${param}: ${reason}` : reason, "invalid_request_error", param, code);
}

/** Render a zod issue path the way OpenAI names fields: `messages[0].role`. */
export function paramName(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else out += out ? `.${String(p)}` : String(p);
  }
  return out;
}

/** The first validation issue of a zod error, as a 400. */
export function fromZodError(err: z.ZodError): HttpError {
  const issue = err.issues[0];
  if (!issue) return invalidRequest(null, "invalid request body");
  const param = paramName(issue.path);
  if (param === "") return invalidRequest(null, `request body: ${issue.message}`);
  return invalidRequest(param, issue.message);
}
