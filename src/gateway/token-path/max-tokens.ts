// The output budget of a token-path call fitted to the context. Agent CLIs send their vendor's
// default max_tokens (64,000 and more) whatever model serves them; an engine answers a budget larger
// than its context leaves with a 400 the agent cannot act on. Here the prompt's length and the
// engine's context length are both known, so the gateway clamps the budget to what the context
// leaves (recorded on the call) or, by config, refuses it with a 400 naming the client's field.
import type { MaxTokensClamp } from "../../core/types.js";
import { InvalidRequestError } from "../http-errors.js";

/** What the gateway does with a max_tokens larger than the context leaves (`gateway.maxTokensPolicy`). */
export type MaxTokensPolicy = "clamp" | "refuse";

/** The policies, for config schemas and option checks. */
export const MAX_TOKENS_POLICIES: readonly MaxTokensPolicy[] = ["clamp", "refuse"];

/** A call's budget: the tokens to generate at most, and the clamp when the client asked for more. */
export interface FittedMaxTokens {
  maxTokens: number;
  clamped?: MaxTokensClamp;
}

/**
 * Fit the client's budget (`asked`; undefined = up to the context) to the context of `backend`:
 * `maxModelLen` minus the prompt's tokens. An engine that reports no context length (null) gets the
 * budget as asked. A prompt that leaves no room is passed on as asked too: the over-long prompt is the
 * engine's 400 to give. Throws {@link InvalidRequestError} naming `field` under `refuse`, and when no
 * budget is asked and no context length is known.
 */
export function fitMaxTokens(
  asked: number | undefined,
  field: string,
  prompt: { promptTokenIds: readonly number[]; maxModelLen: number | null },
  backend: string,
  policy: MaxTokensPolicy,
): FittedMaxTokens {
  const { maxModelLen } = prompt;
  const promptTokens = prompt.promptTokenIds.length;
  if (asked === undefined) {
    if (maxModelLen === null) throw new InvalidRequestError(field, `required: backend '${backend}' does not report its context length`);
    // Up to the context, as the engine would do.
    return { maxTokens: Math.max(1, maxModelLen - promptTokens) };
  }
  if (maxModelLen === null) return { maxTokens: asked };
  const left = maxModelLen - promptTokens;
  if (left < 1 || asked <= left) return { maxTokens: asked };
  if (policy === "refuse") {
    throw new InvalidRequestError(
      field,
      `is ${asked}, more than the ${left} tokens the context leaves (backend '${backend}' has a context of ${maxModelLen} tokens, the prompt takes ${promptTokens}); ` +
        `ask for at most ${left}, or run the gateway with maxTokensPolicy 'clamp'`,
    );
  }
  return { maxTokens: left, clamped: { asked, granted: left } };
}
