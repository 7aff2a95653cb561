// The sampler's definition computed the plain way (issue 18): a Map, a score for every token, a full
// sort with a comparator, and the normalisation over all of them. Without controls at T = 1 or 0
// the score is p itself (q = p / Σp, logprob = log p − log Σp; greedy: log p); otherwise log p / T
// after the controls, with a log-softmax. Tests hold the fast sampler (src/engine/sampling.ts) to
// the same tokens and bit-identical logprobs.
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
  // The probability domain: nothing reshapes p and softmax(log p / T) is p / Σp (T = 1) or greedy.
  const probDomain = (temperature === 1 || temperature === 0) && !logitBias && !suppress;
  const ids = new Int32Array(n);
  const scores = new Float64Array(n); // p, or log p / T (log p when greedy)
  let i = 0;
  for (const [id, p] of probs) {
    ids[i] = id;
    if (probDomain) {
      scores[i] = p > 0 ? p : 0;
    } else {
      let lp = p > 0 ? Math.log(p) : -Infinity;
      if (suppress?.has(id)) lp = -Infinity;
      else if (logitBias) lp += logitBias.get(id) ?? 0;
      scores[i] = temperature > 0 ? lp / temperature : lp;
    }
    i++;
  }
  // Order by probability, most likely first; ties by id so the order never depends on the map.
  const order = Array.from({ length: n }, (_, k) => k).sort(
    (a, b) => (scores[b] as number) - (scores[a] as number) || (ids[a] as number) - (ids[b] as number),
  );

  const best = scores[order[0] as number] as number;
  if (!(probDomain ? best > 0 : best > -Infinity)) throw new RangeError("every token is suppressed or impossible: nothing can be sampled");
  let logZ = 0;
  let z = 1;
  if (probDomain) {
    if (temperature > 0) {
      z = 0;
      for (let k = 0; k < n; k++) z += scores[k] as number;
      logZ = Math.log(z);
    }
  } else if (temperature > 0 || logitBias || suppress) {
    // Controls change the distribution's mass, so log p needs renormalising even when greedy.
    let sum = 0;
    for (let k = 0; k < n; k++) sum += Math.exp((scores[k] as number) - best);
    logZ = best + Math.log(sum);
  }
  const logprobAt = (k: number): number => (probDomain ? Math.log(scores[k] as number) : (scores[k] as number)) - logZ;
  const probAt = (k: number): number => (probDomain ? (scores[k] as number) / z : Math.exp(logprobAt(k)));

  let chosen: number;
  if (temperature === 0) {
    chosen = order[0] as number;
  } else {
    // Nucleus: the shortest most-likely prefix whose mass reaches topP (always at least one token).
    const weights: number[] = [];
    let mass = 0;
    for (const k of order) {
      const q = probAt(k);
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
