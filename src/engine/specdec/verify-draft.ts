// Exact verification of a draft against the target model (speculative decoding in the built-in
// engine). The engine evaluates the request's last token and the k draft tokens in one llama.cpp
// evaluation, with the next-token distribution at every position; then, position by position, it
// samples the target's own token exactly as the non-speculative path would (same parameters, same
// Rng, same sequence position, same min_tokens suppression and logit controls). Draft token d_i is
// accepted while it equals that sample t_i; the first mismatch emits t_i and stops; when all k match,
// the token sampled from the last distribution is emitted too (the bonus token). The output is thus
// the non-speculative output token for token, for greedy and for sampling alike, and the logprobs
// recorded are the target's. For a deterministic draft (SuffixDecoding's) a draft token is accepted
// with probability p(d_i), exactly the acceptance rate of the standard rejection rule (accept with
// min(1, p/q), q = 1 at d_i), so this exactness costs no acceptance.
import type { SampledToken } from "../sampling.js";

/**
 * Verify `draft` against `dists` (draft.length + 1 distributions: after the last real token, then
 * after each draft token). `sample(probs, i)` samples the target's token at the i-th position;
 * `ends(token, n)` says whether the n-th emitted token ends the generation (stop token, length),
 * which stops verification there. Returns the emitted tokens: the accepted draft tokens, then the
 * target's token at the first mismatch (or the bonus token), at most draft.length + 1.
 */
export function verifyDraft(
  draft: readonly number[],
  dists: readonly ReadonlyMap<number, number>[],
  sample: (probs: ReadonlyMap<number, number>, i: number) => SampledToken,
  ends: (token: SampledToken, n: number) => boolean,
): SampledToken[] {
  if (dists.length !== draft.length + 1) throw new RangeError(`verifyDraft: ${draft.length} draft tokens need ${draft.length + 1} distributions, got ${dists.length}`);
  const out: SampledToken[] = [];
  for (let i = 0; i <= draft.length; i++) {
    // Sampled in order and only as far as needed: a plain (unkeyed) Rng stream then advances by
    // exactly one draw per emitted token, as it does without speculation.
    const t = sample(dists[i] as ReadonlyMap<number, number>, i);
    out.push(t);
    if (ends(t, out.length) || i === draft.length || t.id !== draft[i]) break;
  }
  return out;
}

/** How many leading emitted tokens are accepted draft tokens. */
export function acceptedCount(draft: readonly number[], emitted: readonly SampledToken[]): number {
  let n = 0;
  while (n < draft.length && n < emitted.length && emitted[n]?.id === draft[n]) n++;
  return n;
}
