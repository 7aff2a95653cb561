// How many of an answer's tokens are its reasoning, counted on the token ids as vLLM's Responses
// API counts them for usage.output_tokens_details.reasoning_tokens (its reasoning parser's
// count_reasoning_tokens over the output ids): the tokens after the opening marker and before the
// closing one, the markers themselves not counted. The split follows the `think` parser's
// text split, so the count is of exactly the tokens whose text is the reasoning_content: the
// reasoning opens only at the answer's start (or is open from the start where the generation
// prompt opened it), closes at the first closing marker after that, and without one (cut off by
// max_tokens, or never closed) runs to the end of the ids given.
import type { ReasoningParser } from "./reasoning-parser.js";

/** A reasoning parser's markers as token ids of the served model's tokenizer. */
export interface ReasoningMarkerIds {
  open: readonly number[];
  close: readonly number[];
}

/**
 * The reasoning tokens among `ids` (the answer's content ids: a final stop token is not the
 * reasoning's, where vLLM's count would include it for a reasoning never closed). 0 when the parser
 * marks no reasoning or the answer has none.
 */
export function reasoningTokenCount(parser: Pick<ReasoningParser, "startsInReasoning">, ids: readonly number[], markers: ReasoningMarkerIds): number {
  let start: number;
  if (markers.open.length > 0 && startsAt(ids, markers.open, 0)) start = markers.open.length;
  else if (parser.startsInReasoning) start = 0;
  else return 0;
  const close = indexOf(ids, markers.close, start);
  return (close >= 0 ? close : ids.length) - start;
}

function startsAt(ids: readonly number[], part: readonly number[], at: number): boolean {
  return at + part.length <= ids.length && part.every((t, j) => ids[at + j] === t);
}

function indexOf(ids: readonly number[], part: readonly number[], from: number): number {
  if (part.length === 0) return -1;
  for (let i = from; i + part.length <= ids.length; i++) if (startsAt(ids, part, i)) return i;
  return -1;
}
