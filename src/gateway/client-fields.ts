// An engine's refusal in the client's own terms. The engine names fields of the request the gateway sent it: the
// token path's token-id `prompt` for a chat call's messages, and on the Messages and Responses surfaces the
// translated chat request's `messages[i]` (a system prompt or instructions shift the index; one client message
// may become several). The client should read the field it sent: `messages`, `messages.0.content`, `input`.
import type { ClientFieldNames, Endpoint } from "./openai-request.js";

/** `param` (a field of the request the engine was sent) as the client named it. */
export function clientParam(param: string, endpoint: Endpoint, names: ClientFieldNames = {}): string {
  if (endpoint !== "chat") return param;
  // The token path sends a chat call's prompt as token ids, which an engine names `prompt`.
  if (param === "prompt" || param === "messages") return names.messages ?? "messages";
  const message = /^messages\[(\d+)\]/.exec(param);
  if (message && names.messageFields) return names.messageFields[Number(message[1])] ?? names.messages ?? param;
  if ((param === "max_tokens" || param === "max_completion_tokens") && names.max_tokens) return names.max_tokens;
  if (param === "stop" && names.stop) return names.stop;
  // A surface's prefill (Messages: a final assistant message) is continued through continue_final_message.
  if (param === "continue_final_message" && names.messageFields) return names.messageFields.at(-1) ?? param;
  return param;
}

/**
 * An engine's OpenAI-shaped error body with its `param`, and the message's `param: ` prefix, renamed to the client's
 * field (see {@link clientParam}); any other body as it is.
 */
export function inClientTerms(body: unknown, endpoint: Endpoint, names?: ClientFieldNames): unknown {
  if (typeof body !== "object" || body === null) return body;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== "object" || error === null) return body;
  const { param, message } = error as { param?: unknown; message?: unknown };
  if (typeof param !== "string") return body;
  const mapped = clientParam(param, endpoint, names);
  if (mapped === param) return body;
  const renamed = typeof message === "string" && message.startsWith(`${param}: `) ? `${mapped}: ${message.slice(param.length + 2)}` : message;
  return { ...body, error: { ...error, param: mapped, message: renamed } };
}
