// The sampler as it was before the executor's fast path (issue 18): a Map, log p of every token,
// a full sort with a comparator, and the log-softmax over all of them. Tests hold the fast
// sampler (src/engine/sampling.ts) to the same tokens and bit-identical logprobs.
import type { Rng } from "../core/rng.js";
import { PositionKeyedRng } from "../engine/position-keyed-rng.js";
import type { SampledToken, SamplingParams, TokenLogprob } from "../engine/sampling.js";

/** The reference computation of sampleToken (see the file header). */
export function referenceSampleToken(probs: ReadonlyMap<number, number>, params: SamplingParams, rng: Rng, position: number): SampledToken {
  const { temperature, topP, topLogprobs, logitBias, suppress } = params;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new RangeError(`temperature must be >= 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`top_p must be in (0, 1], got ${topP}`);
  if (probs.size === 0) throw new RangeError("empty probability distribution");

  const n = probs.size;
  const ids = new Int32Array(n);
  const logits = new Float64Array(n); // log p / T (log p when greedy)
  let i = 0;
  for (const [id, p] of probs) {
    ids[i] = id;
    let lp = p > 0 ? Math.log(p) : -Infinity;
    if (suppress?.has(id)) lp = -Infinity;
    else if (logitBias) lp += logitBias.get(id) ?? 0;
    logits[i] = temperature > 0 ? lp / temperature : lp;
    i++;
  }
  // Order by probability, most likely first; ties by id so the order never depends on the map.
  const order = Array.from({ length: n }, (_, k) => k).sort(
    (a, b) => (logits[b] as number) - (logits[a] as number) || (ids[a] as number) - (ids[b] as number),
  );

  if (!(logits[order[0] as number] as number > -Infinity)) throw new RangeError("every token is suppressed or impossible: nothing can be sampled");
  let logZ = 0;
  // Controls change the distribution's mass, so log p needs renormalising even when greedy.
  if (temperature > 0 || logitBias || suppress) {
    const max = logits[order[0] as number] as number;
    let sum = 0;
    for (let k = 0; k < n; k++) sum += Math.exp((logits[k] as number) - max);
    logZ = max + Math.log(sum);
  }
  const logprobAt = (k: number): number => (logits[k] as number) - logZ;

  let chosen: number;
  if (temperature === 0) {
    chosen = order[0] as number;
  } else {
    // Nucleus: the shortest most-likely prefix whose mass reaches topP (always at least one token).
    const weights: number[] = [];
    let mass = 0;
    for (const k of order) {
      const q = Math.exp(logprobAt(k));
      if (q <= 0) break;
      weights.push(q);
      mass += q;
      if (mass >= topP) break;
    }
    let r = tokenDraw(rng, position) * mass;
    let pick = weights.length - 1;
    for (let w = 0; w < weights.length; w++) {
      r -= weights[w] as number;
      if (r < 0) {
        pick = w;
        break;
      }
    }
    chosen = order[pick] as number;
  }

  const top: TokenLogprob[] = [];
  for (let k = 0; k < Math.min(topLogprobs, n); k++) {
    const idx = order[k] as number;
    top.push({ id: ids[idx] as number, logprob: logprobAt(idx) });
  }
  return { id: ids[chosen] as number, logprob: logprobAt(chosen), top };
}

/** The uniform draw for the token at `position`: position-keyed for seeded requests, else the stream's next. */
function tokenDraw(rng: Rng, position: number): number {
  return rng instanceof PositionKeyedRng ? rng.drawAt(position) : rng.float();
}
