// Arbor's own next-token sampler. llama.cpp gives the model's temperature-0 distribution p; the
// engine samples from softmax(log p / T) with a seeded Rng, so one request seed reproduces the same
// tokens whatever else the batch holds. A seeded request's Rng (PositionKeyedRng) keys each draw by
// the token's sequence position, so a continuation from prompt ‖ tokens so far (a chunk of a
// divided rollout, a resume, a recompute) reproduces the unbroken generation. Reported logprob = log softmax(log p / T) of the chosen
// token: the temperature-scaled distribution before top-p truncation (raw log p when T = 0), which
// a trainer recomputes exactly from the logits; with top_p = 1 it is the sampling distribution.
// Without controls at T = 1 (and T = 0) the distribution is p itself, so the sampler works on p
// directly (q = p / Σp, logprob = log p − log Σp) and takes a logarithm only of what it reports:
// ~5× cheaper per token than log p of the whole vocabulary (issue 18 item 6).
// vLLM's logit controls come before the temperature, in vLLM's order (v1 Sampler: logit_bias and
// min_tokens, then repetition_penalty): `logitBias` adds to a token's logit (softmax is shift-
// invariant, so adding it to log p is exact); `suppress` (min_tokens' stop tokens) sets logits to
// -inf. repetition_penalty needs the raw logits' signs, which log p has lost: llama.cpp applies it
// (see llama-context.ts), and then the bias too, ahead of it. The reported logprob is under the
// controlled distribution: what the token was drawn from.
import type { Rng } from "../core/rng.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";

export interface SamplingParams {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables truncation. */
  topP: number;
  /** How many most likely alternatives to report with each token (0 = none). */
  topLogprobs: number;
  /** Added to the logits of these token ids before the temperature (vLLM logit_bias). */
  logitBias?: ReadonlyMap<number, number>;
  /** Token ids that cannot be drawn (min_tokens: the stop tokens until enough were generated). */
  suppress?: ReadonlySet<number>;
}

/** A request's vLLM sampling controls beyond temperature and top-p (all optional, vLLM defaults). */
export interface SamplingControls {
  /** Token id → bias added to its logit, in [-100, 100] (vLLM logit_bias). */
  logitBias?: ReadonlyMap<number, number>;
  /** > 0; 1 = off. Tokens seen in the prompt or output: positive logits divided, others multiplied. */
  repetitionPenalty?: number;
  /** The stop tokens (engine's and `stopTokenIds`) cannot be drawn before this many output tokens. */
  minTokens?: number;
  /** Do not stop on the engine's end-of-sequence tokens (`</s>`, `<|end|>`). */
  ignoreEos?: boolean;
  /** More tokens that end the generation (kept in the output, as vLLM does). */
  stopTokenIds?: readonly number[];
}

/**
 * Check a request's controls (RangeError naming the field; the HTTP layer answers 400 first).
 * `maxTokens` bounds min_tokens, `vocabSize` the token ids.
 */
export function checkSamplingControls(c: SamplingControls, maxTokens: number, vocabSize: number): void {
  const badId = (id: number): boolean => !Number.isInteger(id) || id < 0 || id >= vocabSize;
  if (c.logitBias) {
    const bad = [...c.logitBias.keys()].filter(badId);
    if (bad.length > 0) throw new RangeError(`logit_bias: token id(s) ${bad.join(", ")} are outside the vocabulary (size ${vocabSize})`);
    for (const [id, b] of c.logitBias) if (!(b >= -100 && b <= 100)) throw new RangeError(`logit_bias: the bias of token ${id} must be in [-100, 100], got ${b}`);
  }
  if (c.repetitionPenalty !== undefined && !(c.repetitionPenalty > 0 && Number.isFinite(c.repetitionPenalty))) {
    throw new RangeError(`repetition_penalty must be a finite number greater than zero, got ${c.repetitionPenalty}`);
  }
  if (c.minTokens !== undefined) {
    if (!Number.isInteger(c.minTokens) || c.minTokens < 0) throw new RangeError(`min_tokens must be an integer >= 0, got ${c.minTokens}`);
    if (c.minTokens > maxTokens) throw new RangeError(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${c.minTokens}`);
  }
  if (c.stopTokenIds) {
    const bad = c.stopTokenIds.filter(badId);
    if (bad.length > 0) throw new RangeError(`stop_token_ids: token id(s) ${bad.join(", ")} are outside the vocabulary (size ${vocabSize})`);
  }
}

/**
 * When a generation stops, per vLLM's check_stop and MinTokensLogitsProcessor: the engine's EOS
 * tokens (unless `ignoreEos`) and the request's `stopTokenIds` end it; until `minTokens` output
 * tokens exist all of them (EOS included even with ignore_eos, as vLLM's all_stop_token_ids) are
 * suppressed. Executors and the scheduler share it so every path stops alike.
 */
export class StopRule {
  /** Tokens that end the generation. */
  readonly stops: ReadonlySet<number>;
  private readonly suppressed: ReadonlySet<number>;
  private readonly minTokens: number;

  constructor(engineEos: Iterable<number>, c: Pick<SamplingControls, "ignoreEos" | "stopTokenIds" | "minTokens"> = {}) {
    const eos = [...engineEos];
    const extra = c.stopTokenIds ?? [];
    this.stops = new Set([...(c.ignoreEos ? [] : eos), ...extra]);
    this.suppressed = new Set([...eos, ...extra]);
    this.minTokens = c.minTokens ?? 0;
  }

  /** Tokens that cannot be drawn when `outputs` tokens were generated so far (undefined: none). */
  suppressAt(outputs: number): ReadonlySet<number> | undefined {
    return outputs < this.minTokens && this.suppressed.size > 0 ? this.suppressed : undefined;
  }

  /** Whether `tokenId`, the `outputs`-th output token (counting it), ends the generation. */
  stopsAt(tokenId: number, outputs: number): boolean {
    return outputs >= this.minTokens && this.stops.has(tokenId);
  }
}

/**
 * Which controls llama.cpp applies to the raw logits and which {@link sampleToken} applies to log p.
 * A repetition penalty needs raw logits; vLLM biases before penalising, so a bias then goes along.
 */
export function splitLogitControls(c: Pick<SamplingControls, "logitBias" | "repetitionPenalty">): {
  raw?: { repetitionPenalty: number; logitBias?: ReadonlyMap<number, number> };
  logitBias?: ReadonlyMap<number, number>;
} {
  const bias = c.logitBias && c.logitBias.size > 0 ? c.logitBias : undefined;
  if (c.repetitionPenalty === undefined || c.repetitionPenalty === 1) return bias ? { logitBias: bias } : {};
  return { raw: { repetitionPenalty: c.repetitionPenalty, ...(bias ? { logitBias: bias } : {}) } };
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
  checkParams(params);
  if (probs.size === 0) throw new RangeError("empty probability distribution");
  const n = probs.size;
  const s = scratch(n);
  const probDomain = inProbabilityDomain(params);
  let i = 0;
  for (const [id, p] of probs) setCandidate(s, i++, id, p, params, probDomain);
  return pick(s, n, params, rng, position, probDomain);
}

/**
 * {@link sampleToken} on the distribution as llama.cpp's sampler hands it over: a flat
 * `[id0, p0, id1, p1, …]` (node-llama-cpp's raw `sampleToken` result, most likely first), read in
 * place: no Map, no copy of the distribution, and no sort when it arrives ordered. Same tokens and
 * bit-identical logprobs as {@link sampleToken} on the Map of the same pairs in the same order.
 */
export function sampleTokenFromPairs(pairs: ArrayLike<number>, params: SamplingParams, rng: Rng, position: number): SampledToken {
  checkParams(params);
  const n = pairs.length >> 1;
  if (n === 0) throw new RangeError("empty probability distribution");
  const s = scratch(n);
  const probDomain = inProbabilityDomain(params);
  for (let i = 0; i < n; i++) setCandidate(s, i, pairs[2 * i] as number, pairs[2 * i + 1] as number, params, probDomain);
  return pick(s, n, params, rng, position, probDomain);
}

function checkParams({ temperature, topP }: SamplingParams): void {
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new RangeError(`temperature must be >= 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`top_p must be in (0, 1], got ${topP}`);
}

/** Per-call working arrays, reused across calls (sampling is synchronous, so one set serves all). */
interface Scratch {
  ids: Int32Array;
  /**
   * The candidates' scores, ordered as their probabilities: p itself in the probability domain
   * ({@link inProbabilityDomain}), else log p / T (log p when greedy) after the controls.
   */
  logits: Float64Array;
  /** Candidate indexes, most likely first (ties by id). */
  order: Int32Array;
  /** Nucleus weights, in `order`. */
  weights: Float64Array;
}

let shared: Scratch = { ids: new Int32Array(0), logits: new Float64Array(0), order: new Int32Array(0), weights: new Float64Array(0) };

function scratch(n: number): Scratch {
  if (shared.ids.length < n) {
    // Grown to the vocabulary once; bounded by the largest distribution ever sampled.
    shared = { ids: new Int32Array(n), logits: new Float64Array(n), order: new Int32Array(n), weights: new Float64Array(n) };
  }
  return shared;
}

/**
 * Whether the sampler works on p itself: no control reshapes the distribution and the temperature
 * is 1 (softmax(log p) = p / Σp) or 0 (greedy, reported log p unnormalised). Any other temperature
 * needs p^(1/T), a logarithm per token anyway.
 */
export function inProbabilityDomain({ temperature, logitBias, suppress }: SamplingParams): boolean {
  return (temperature === 1 || temperature === 0) && !logitBias && !suppress;
}

function setCandidate(s: Scratch, i: number, id: number, p: number, params: SamplingParams, probDomain: boolean): void {
  s.ids[i] = id;
  if (probDomain) {
    // Impossible tokens score 0 (as log p = -inf in the log domain): never drawn, ordered by id.
    s.logits[i] = p > 0 ? p : 0;
    return;
  }
  const { temperature, logitBias, suppress } = params;
  let lp = p > 0 ? Math.log(p) : -Infinity;
  if (suppress?.has(id)) lp = -Infinity;
  else if (logitBias) lp += logitBias.get(id) ?? 0;
  s.logits[i] = temperature > 0 ? lp / temperature : lp;
}

/**
 * Fill `order[0, n)` with the candidates most likely first, ties by id, so the order never depends on
 * how they arrived. llama.cpp's list is sorted by logit already: one pass checks it and orders the
 * runs of equal values by id; anything else (controls reshaped it, a Map in another order) is sorted.
 */
function orderCandidates(s: Scratch, n: number): Int32Array {
  const { ids, logits } = s;
  const order = s.order.subarray(0, n);
  for (let k = 0; k < n; k++) order[k] = k;
  const byId = (a: number, b: number): number => (ids[a] as number) - (ids[b] as number);
  let k = 1;
  while (k < n) {
    const prev = logits[k - 1] as number;
    const cur = logits[k] as number;
    if (cur < prev) {
      k++;
      continue;
    }
    if (cur > prev) {
      // -inf - -inf is NaN, falsy: equal logits (even impossible tokens) then go by id.
      return order.sort((a, b) => (logits[b] as number) - (logits[a] as number) || byId(a, b));
    }
    let end = k + 1;
    while (end < n && logits[end] === prev) end++;
    order.subarray(k - 1, end).sort(byId);
    k = end;
  }
  return order;
}

function pick(s: Scratch, n: number, params: SamplingParams, rng: Rng, position: number, probDomain: boolean): SampledToken {
  const { temperature, topP, topLogprobs, logitBias, suppress } = params;
  const { ids, logits: scores, weights } = s;
  const order = orderCandidates(s, n);
  const first = order[0] as number;
  const best = scores[first] as number;
  if (!(probDomain ? best > 0 : best > -Infinity)) throw new RangeError("every token is suppressed or impossible: nothing can be sampled");
  // Sums run over the candidates in their arrival order (the order they were always taken in).
  let logZ = 0;
  let z = 1;
  if (probDomain) {
    // T = 1: q = p / Σp (llama.cpp's float32 softmax sums to 1 only to ~1e-7). T = 0: log p as is.
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
  const logprobOf = (idx: number): number => (probDomain ? Math.log(scores[idx] as number) : (scores[idx] as number)) - logZ;

  let chosen: number;
  if (temperature === 0) {
    chosen = first;
  } else {
    // Nucleus: the shortest most-likely prefix whose mass reaches topP (always at least one token).
    let count = 0;
    let mass = 0;
    // Two loops, not a branch per candidate: the domain is fixed for the call.
    if (probDomain) {
      for (let k = 0; k < n; k++) {
        const q = (scores[order[k] as number] as number) / z;
        if (q <= 0) break;
        weights[count++] = q;
        mass += q;
        if (mass >= topP) break;
      }
    } else {
      for (let k = 0; k < n; k++) {
        const q = Math.exp((scores[order[k] as number] as number) - logZ);
        if (q <= 0) break;
        weights[count++] = q;
        mass += q;
        if (mass >= topP) break;
      }
    }
    let r = tokenDraw(rng, position) * mass;
    let at = count - 1;
    for (let w = 0; w < count; w++) {
      r -= weights[w] as number;
      if (r < 0) {
        at = w;
        break;
      }
    }
    chosen = order[at] as number;
  }

  const top: TokenLogprob[] = [];
  for (let k = 0; k < Math.min(topLogprobs, n); k++) {
    const idx = order[k] as number;
    top.push({ id: ids[idx] as number, logprob: logprobOf(idx) });
  }
  return { id: ids[chosen] as number, logprob: logprobOf(chosen), top };
}

/** The uniform draw for the token at `position`: position-keyed for seeded requests, else the stream's next. */
/** The uniform draw that picks the token at `position`: keyed by position for a {@link PositionKeyedRng}, else the stream's next. */
export function tokenDraw(rng: Rng, position: number): number {
  return rng instanceof PositionKeyedRng ? rng.drawAt(position) : rng.float();
}
