// Which calls the gateway serves on the token path (its own token-id prompts) rather than passing
// them through to the engine's OpenAI routes.
import { isTokenBackend, type Backend, type TokenBackend } from "../backends/backend.js";
import type { GatewayContext } from "./gateway-context.js";
import type { PreparedRequest } from "./openai-request.js";
import { declaresTools } from "./token-path/tool-plan.js";

/**
 * Whether `prepared` routed to `b` takes the token path: a token backend with the engine's
 * tokenizer. A chat request that declares tools also needs the served model's tool-call format
 * (`b.toolParser`: Arbor's markup, Hermes/Qwen, Llama 3 JSON, Mistral), which the gateway reads from
 * the generated ids for every engine type; a backend without one is text-only for tools, and such
 * requests go through the passthrough, where the engine answers with its own tool_calls.
 */
export function usesTokenPath(ctx: GatewayContext, b: Backend | undefined, prepared: PreparedRequest): b is TokenBackend {
  if (!ctx.tokenPath || b === undefined || !isTokenBackend(b)) return false;
  if (prepared.endpoint === "chat" && declaresTools(prepared.upstreamBody) && b.toolParser === undefined) return false;
  return b.capabilities.tokenIds && typeof b.tokenize === "function" && typeof b.detokenize === "function";
}

/**
 * Whether a streamed `prepared` routed to `b` takes the token path: as {@link usesTokenPath}, with
 * token streaming. Streamed calls generate on the routed backend in one piece (Seer's divided
 * rollout, which moves chunks between backends, applies to non-streamed calls only).
 */
export function usesTokenStream(ctx: GatewayContext, b: Backend | undefined, prepared: PreparedRequest): b is TokenBackend {
  return usesTokenPath(ctx, b, prepared) && typeof b.generateStream === "function";
}
