// Arbor's own next-token sampler. llama.cpp gives the model's temperature-0 distribution p; the
// engine samples from softmax(log p / T) with a seeded Rng, so one request seed reproduces the same
// tokens whatever else the batch holds. A seeded request's Rng (PositionKeyedRng) keys each draw by
// the token's sequence position, so a continuation from prompt ‖ tokens so far (a chunk of a
// divided rollout, a resume, a recompute) reproduces the unbroken generation. Reported logprob = log softmax(log p / T) of the chosen
// token: the temperature-scaled distribution before top-p truncation (raw log p when T = 0), which
// a trainer recomputes exactly from the logits; with top_p = 1 it is the sampling distribution.
import type { Rng } from "../core/rng.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";

export interface SamplingParams {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables truncation. */
  topP: number;
  /** How many most likely alternatives to report with each token (0 = none). */
  topLogprobs: number;
}

export interface TokenLogprob {
  id: number;
  logprob: number;
}

export interface SampledToken extends TokenLogprob {
  /** The `topLogprobs` most likely tokens, most likely first, under the reported distribution. */
  top: TokenLogprob[];
}

/**
 * Pick the next token from llama.cpp's temperature-0 probabilities (token id → probability).
 * Greedy when temperature is 0 (ties go to the lower id); otherwise one draw from softmax(log p / T)
 * restricted to the top-p nucleus: `rng.drawAt(position)` for a {@link PositionKeyedRng}, else the
 * next `rng.float()` of the stream. `position` is the absolute sequence position of the token being
 * sampled (prompt length + tokens generated before it).
 */
export function sampleToken(probs: ReadonlyMap<number, number>, params: SamplingParams, rng: Rng, position: number): SampledToken {
  const { temperature, topP, topLogprobs } = params;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new RangeError(`temperature must be >= 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`top_p must be in (0, 1], got ${topP}`);
  if (probs.size === 0) throw new RangeError("empty probability distribution");

  const n = probs.size;
  const ids = new Int32Array(n);
  const logits = new Float64Array(n); // log p / T (log p when greedy)
  let i = 0;
  for (const [id, p] of probs) {
    ids[i] = id;
    const lp = p > 0 ? Math.log(p) : -Infinity;
    logits[i] = temperature > 0 ? lp / temperature : lp;
    i++;
  }
  // Order by probability, most likely first; ties by id so the order never depends on the map.
  const order = Array.from({ length: n }, (_, k) => k).sort(
    (a, b) => (logits[b] as number) - (logits[a] as number) || (ids[a] as number) - (ids[b] as number),
  );

  let logZ = 0;
  if (temperature > 0) {
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
