// A passthrough call's max_tokens fitted to the context, where the engine says how long its context is.
// A call passes through (token path off, tools without the model's tool parser) with the body the
// client sent; an agent CLI's 64,000-token default would be the engine's 400. When the backend has
// the engine's tokenizer, the prompt is tokenized as the engine's chat route renders it and the
// budget fitted as on the token path (token-path/max-tokens.ts): clamped in the body sent upstream
// and recorded, or refused. Backends without a tokenizer, or whose tokenizer reports no context
// length, get the body as sent.
import { isTokenBackend, type Backend } from "../backends/backend.js";
import type { MaxTokensClamp } from "../core/types.js";
import type { GatewayContext } from "./gateway-context.js";
import { budgetField, type PreparedRequest } from "./openai-request.js";
import { buildPrompt } from "./token-path/context-prompt.js";
import { fitMaxTokens } from "./token-path/max-tokens.js";
import { promptSource } from "./token-path/prompt-source.js";

/**
 * Fit `prepared`'s budget to `backend`'s context: returns the body to send upstream and the clamp,
 * if any. Throws the InvalidRequestError of `gateway.maxTokensPolicy: refuse`. A tokenizer that fails
 * leaves the body as sent (the engine answers for its prompt itself).
 */
export async function fitPassthroughBudget(
  ctx: Pick<GatewayContext, "maxTokensPolicy" | "callTimeoutMs" | "clock">,
  backend: Backend,
  prepared: PreparedRequest,
): Promise<{ body: Record<string, unknown>; clamped?: MaxTokensClamp }> {
  const body = prepared.upstreamBody;
  const tokenize = isTokenBackend(backend) ? backend.tokenize : undefined;
  const field = budgetField(prepared.endpoint, body);
  const asked = body[field];
  // An absent budget is the engine's to fill; a malformed one the engine's to refuse.
  if (tokenize === undefined || !Number.isInteger(asked) || (asked as number) < 1) return { body };
  const ac = new AbortController();
  const timer = ctx.clock.setTimer(ctx.callTimeoutMs, () => ac.abort(new Error(`tokenizing for max_tokens took over ${ctx.callTimeoutMs} ms`)));
  let prompt: { promptTokenIds: number[]; maxModelLen: number | null };
  try {
    prompt = await buildPrompt(promptSource(prepared.endpoint, prepared), undefined, (req) => tokenize.call(backend, req), ac.signal);
  } catch {
    return { body };
  } finally {
    timer.cancel();
  }
  const clientField = field === "max_tokens" ? (prepared.clientNames?.max_tokens ?? field) : field;
  const fitted = fitMaxTokens(asked as number, clientField, prompt, backend.name, ctx.maxTokensPolicy);
  if (!fitted.clamped) return { body };
  return { body: { ...body, [field]: fitted.maxTokens }, clamped: fitted.clamped };
}
