// Response bodies in vLLM's shapes (chat: `token_ids` in the choice, `prompt_token_ids` at the top;
// completions: both in the choice), plus Arbor's `policy_version` on every body.
import type { ModelTokenizer } from "../model/tokenizer.js";
import type { GenerateResult } from "./executor.js";
import type { SampledToken, TokenLogprob } from "./sampling.js";

/** JSON has no -Infinity; vLLM reports impossible tokens as -9999. */
const MIN_LOGPROB = -9999;

function jsonLogprob(lp: number): number {
  return Number.isFinite(lp) ? lp : MIN_LOGPROB;
}

/**
 * Output text: the generated tokens decoded, without the stop token that ended them. `special`
 * renders special tokens as their text (vLLM's skip_special_tokens=false, which tool parsers of
 * formats with special markers need).
 */
export function outputText(tok: ModelTokenizer, result: GenerateResult, special = false): string {
  return tok.decode(contentTokenIds(result), { special });
}

function contentTokenIds(result: GenerateResult): number[] {
  const ids = result.tokens.map((t) => t.id);
  return result.finishReason === "stop" ? ids.slice(0, -1) : ids;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** OpenAI's `usage` block. */
export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** vLLM's `stop_reason`: the stop token id unless the stop was the model's EOS (then null). */
export function stopReason(tok: ModelTokenizer, result: GenerateResult): number | null {
  return result.stopTokenId !== undefined && result.stopTokenId !== tok.eosId ? result.stopTokenId : null;
}

/** Chat `logprobs.content`: one entry per output token, stop token included. */
export function chatLogprobs(tok: ModelTokenizer, tokens: readonly SampledToken[]): { content: unknown[] } {
  const entry = (t: TokenLogprob): { token: string; logprob: number; bytes: number[] } => ({
    token: tok.tokenText(t.id),
    logprob: jsonLogprob(t.logprob),
    bytes: tok.tokenBytes(t.id),
  });
  return { content: tokens.map((t) => ({ ...entry(t), top_logprobs: t.top.map(entry) })) };
}

/**
 * Legacy completions logprobs: `top_logprobs[i]` holds the `n` most likely tokens plus the chosen
 * one (OpenAI: up to n + 1 entries); `text_offset[i]` is where token i starts in the output text.
 */
export function completionLogprobs(
  tok: ModelTokenizer,
  result: GenerateResult,
): { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] } {
  const content = contentTokenIds(result);
  const textOffset: number[] = [];
  for (let i = 0; i < result.tokens.length; i++) {
    textOffset.push(tok.decode(content.slice(0, Math.min(i, content.length))).length);
  }
  return {
    tokens: result.tokens.map((t) => tok.tokenText(t.id)),
    token_logprobs: result.tokens.map((t) => jsonLogprob(t.logprob)),
    top_logprobs: result.tokens.map((t) => completionTopLogprobs(tok, t)),
    text_offset: textOffset,
  };
}

/** One legacy `top_logprobs` entry: the `n` alternatives plus the chosen token. */
export function completionTopLogprobs(tok: ModelTokenizer, t: SampledToken): Record<string, number> {
  const top: Record<string, number> = {};
  for (const alt of t.top) top[tok.tokenText(alt.id)] = jsonLogprob(alt.logprob);
  top[tok.tokenText(t.id)] = jsonLogprob(t.logprob);
  return top;
}

/** Legacy completions logprobs of one streamed token that starts at `textOffset` of the output. */
export function completionChunkLogprobs(
  tok: ModelTokenizer,
  t: SampledToken,
  textOffset: number,
): { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] } {
  return { tokens: [tok.tokenText(t.id)], token_logprobs: [jsonLogprob(t.logprob)], top_logprobs: [completionTopLogprobs(tok, t)], text_offset: [textOffset] };
}
