// What the token path builds a prompt from: a chat request's messages, or a completions prompt
// (text or token ids), unwrapped from OpenAI's one-element batch form.
import type { Endpoint, PreparedRequest } from "../openai-request.js";
import type { PromptSource } from "./context-prompt.js";

/** The prompt source of a prepared (already validated) request. */
export function promptSource(endpoint: Endpoint, prepared: PreparedRequest): PromptSource {
  if (endpoint === "chat") {
    // A forced call's opening is added where the backend (and so its parser's format) is known.
    const { tools } = prepared.upstreamBody;
    const continued = prepared.continueFinalMessage ? { continueFinal: true as const } : {};
    if (!(Array.isArray(tools) && tools.length > 0)) return { endpoint, messages: prepared.messages, ...continued };
    return { endpoint, messages: prepared.messages, tools, ...continued };
  }
  let p: unknown = prepared.upstreamBody.prompt;
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === "string" || Array.isArray(p[0]))) p = p[0];
  // prepareRequest accepted only a string or a non-empty list of token ids.
  return { endpoint, prompt: p as string | number[] };
}
