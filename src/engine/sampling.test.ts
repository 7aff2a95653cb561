import { describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";
import { referenceSampleToken } from "../testing/reference-sampler.js";
import { checkSamplingControls, inProbabilityDomain, sampleToken, sampleTokenFromPairs, splitLogitControls, StopRule, type SampledToken, type SamplingParams } from "./sampling.js";

// A fixed distribution over 5 tokens, listed in a scrambled order (llama.cpp sorts, we must not rely on it).
const P = new Map<number, number>([
  [3, 0.1],
  [0, 0.4],
  [4, 0.05],
  [1, 0.3],
  [2, 0.15],
]);

function tempered(T: number): Map<number, number> {
  let z = 0;
  for (const p of P.values()) z += p ** (1 / T);
  return new Map([...P].map(([id, p]) => [id, p ** (1 / T) / z]));
}

describe("sampleToken", () => {
  it("is greedy at temperature 0 and reports the raw log-probability", () => {
    const rng = new Rng(1);
    const t = sampleToken(P, { temperature: 0, topP: 1, topLogprobs: 2 }, rng, 0);
    expect(t.id).toBe(0);
    expect(t.logprob).toBeCloseTo(Math.log(0.4), 12);
    expect(t.top.map((x) => x.id)).toEqual([0, 1]);
    expect(t.top[1]?.logprob).toBeCloseTo(Math.log(0.3), 12);
    expect(rng.nextU32()).toBe(new Rng(1).nextU32()); // greedy draws nothing from the stream
  });

  it("breaks greedy ties towards the lower id", () => {
    const t = sampleToken(new Map([[7, 0.5], [2, 0.5]]), { temperature: 0, topP: 1, topLogprobs: 0 }, new Rng(1), 0);
    expect(t.id).toBe(2);
  });

  it("reports log softmax(log p / T) and samples from it", () => {
    const T = 0.5;
    const q = tempered(T);
    const rng = new Rng(42);
    const counts = new Map<number, number>();
    const n = 5000;
    for (let i = 0; i < n; i++) {
      const t = sampleToken(P, { temperature: T, topP: 1, topLogprobs: 5 }, rng, i);
      expect(t.logprob).toBeCloseTo(Math.log(q.get(t.id) as number), 10);
      counts.set(t.id, (counts.get(t.id) ?? 0) + 1);
    }
    for (const [id, qi] of q) {
      const freq = (counts.get(id) ?? 0) / n;
      // 5 standard errors of a binomial proportion.
      expect(Math.abs(freq - qi)).toBeLessThan(5 * Math.sqrt((qi * (1 - qi)) / n) + 1e-3);
    }
  });

  it("keeps the same token stream for the same seed and differs for another", () => {
    const draw = (seed: number): number[] => {
      const rng = new Rng(seed);
      return Array.from({ length: 40 }, (_, i) => sampleToken(P, { temperature: 1, topP: 1, topLogprobs: 0 }, rng, i).id);
    };
    expect(draw(5)).toEqual(draw(5));
    expect(draw(5)).not.toEqual(draw(6));
  });

  it("restricts sampling to the top-p nucleus but reports the untruncated logprob", () => {
    const rng = new Rng(3);
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const t = sampleToken(P, { temperature: 1, topP: 0.65, topLogprobs: 0 }, rng, i);
      seen.add(t.id);
      expect(t.logprob).toBeCloseTo(Math.log(P.get(t.id) as number), 10);
    }
    // 0.4 + 0.3 >= 0.65: only tokens 0 and 1 are in the nucleus.
    expect([...seen].sort()).toEqual([0, 1]);
  });

  it("never samples a zero-probability token", () => {
    const rng = new Rng(9);
    const probs = new Map([[0, 1], [1, 0]]);
    for (let i = 0; i < 200; i++) expect(sampleToken(probs, { temperature: 2, topP: 1, topLogprobs: 0 }, rng, i).id).toBe(0);
    expect(sampleToken(probs, { temperature: 0, topP: 1, topLogprobs: 2 }, rng, 0).top[1]?.logprob).toBe(-Infinity);
  });

  it("rejects bad parameters", () => {
    const rng = new Rng(1);
    expect(() => sampleToken(P, { temperature: -1, topP: 1, topLogprobs: 0 }, rng, 0)).toThrow(/temperature/);
    expect(() => sampleToken(P, { temperature: 1, topP: 0, topLogprobs: 0 }, rng, 0)).toThrow(/top_p/);
    expect(() => sampleToken(new Map(), { temperature: 1, topP: 1, topLogprobs: 0 }, rng, 0)).toThrow(/empty/);
  });

  it("with a PositionKeyedRng, the token at a position depends only on (seed, position)", () => {
    const params = { temperature: 1, topP: 1, topLogprobs: 0 };
    const run = (rng: Rng, from: number, n: number): number[] => Array.from({ length: n }, (_, i) => sampleToken(P, params, rng, from + i).id);
    const whole = run(PositionKeyedRng.fromSeed(5), 10, 40);
    // A continuation with a fresh Rng from position 25 draws what the unbroken run drew there...
    expect(run(PositionKeyedRng.fromSeed(5), 25, 25)).toEqual(whole.slice(15));
    // ...and so does one whose Rng was used for other draws first: no stream is consumed.
    const used = PositionKeyedRng.fromSeed(5);
    for (let i = 0; i < 7; i++) used.float();
    expect(run(used, 10, 40)).toEqual(whole);
    // A plain Rng of the same seed is a stream: starting later shifts what it gives.
    expect(run(new Rng(5), 25, 25)).not.toEqual(whole.slice(15));
    expect(run(PositionKeyedRng.fromSeed(6), 10, 40)).not.toEqual(whole);
  });
});

describe("sampling controls (vLLM logit_bias, min_tokens, ignore_eos, stop_token_ids)", () => {
  it("adds logit_bias to the logits before the temperature and reports the biased distribution", () => {
    const bias = new Map([[4, Math.log(8)]]); // p4 0.05 → weight 0.4 before renormalising
    const g = sampleToken(P, { temperature: 0, topP: 1, topLogprobs: 0, logitBias: bias }, new Rng(1), 0);
    // 0.4 vs 0.4: the tie goes to the lower id; the mass is now 1.35.
    expect(g.id).toBe(0);
    expect(g.logprob).toBeCloseTo(Math.log(0.4 / 1.35), 12);
    const T = 0.5;
    const w = new Map([...P].map(([id, p]) => [id, (p * (id === 4 ? 8 : 1)) ** (1 / T)]));
    const z = [...w.values()].reduce((a, b) => a + b, 0);
    const t = sampleToken(P, { temperature: T, topP: 1, topLogprobs: 0, logitBias: bias }, new Rng(3), 0);
    expect(t.logprob).toBeCloseTo(Math.log((w.get(t.id) as number) / z), 12);
  });

  it("never draws a suppressed token and renormalises without it", () => {
    for (let seed = 0; seed < 200; seed++) {
      const t = sampleToken(P, { temperature: 1, topP: 1, topLogprobs: 5, suppress: new Set([0, 1]) }, new Rng(seed), 0);
      expect([2, 3, 4]).toContain(t.id);
      expect(t.logprob).toBeCloseTo(Math.log((P.get(t.id) as number) / 0.3), 12);
      expect(t.top.find((x) => x.id === 0)?.logprob).toBe(-Infinity);
    }
    expect(sampleToken(P, { temperature: 0, topP: 1, topLogprobs: 0, suppress: new Set([0]) }, new Rng(1), 0).id).toBe(1);
  });

  it("refuses a distribution in which every token is suppressed", () => {
    expect(() => sampleToken(new Map([[1, 1]]), { temperature: 1, topP: 1, topLogprobs: 0, suppress: new Set([1]) }, new Rng(1), 0)).toThrow(/suppressed/);
  });

  it("StopRule: EOS and stop_token_ids end a generation, ignore_eos drops EOS, min_tokens holds all of them back", () => {
    const eos = [2, 7];
    const plain = new StopRule(eos);
    expect(plain.stopsAt(2, 1)).toBe(true);
    expect(plain.stopsAt(9, 1)).toBe(false);
    expect(plain.suppressAt(0)).toBeUndefined();

    const r = new StopRule(eos, { ignoreEos: true, stopTokenIds: [9], minTokens: 3 });
    expect([...r.stops]).toEqual([9]);
    // As vLLM's all_stop_token_ids: EOS stays suppressed under min_tokens even with ignore_eos.
    expect([...(r.suppressAt(2) ?? [])].sort()).toEqual([2, 7, 9]);
    expect(r.suppressAt(3)).toBeUndefined();
    expect(r.stopsAt(9, 2)).toBe(false);
    expect(r.stopsAt(9, 3)).toBe(true);
    expect(r.stopsAt(2, 5)).toBe(false);
  });

  it("splits the controls: a repetition penalty goes to the raw logits, with the bias ahead of it", () => {
    const bias = new Map([[1, 2]]);
    expect(splitLogitControls({ logitBias: bias })).toEqual({ logitBias: bias });
    expect(splitLogitControls({ logitBias: bias, repetitionPenalty: 1 })).toEqual({ logitBias: bias });
    expect(splitLogitControls({ logitBias: bias, repetitionPenalty: 1.3 })).toEqual({ raw: { repetitionPenalty: 1.3, logitBias: bias } });
    expect(splitLogitControls({})).toEqual({});
  });

  it("checkSamplingControls names the field", () => {
    expect(() => checkSamplingControls({ logitBias: new Map([[99, 1]]) }, 4, 10)).toThrow(/logit_bias: token id\(s\) 99/);
    expect(() => checkSamplingControls({ repetitionPenalty: 0 }, 4, 10)).toThrow(/repetition_penalty/);
    expect(() => checkSamplingControls({ minTokens: 5 }, 4, 10)).toThrow(/min_tokens must be less than or equal to max_tokens=4/);
    expect(() => checkSamplingControls({ stopTokenIds: [10] }, 4, 10)).toThrow(/stop_token_ids/);
    expect(() => checkSamplingControls({ minTokens: 4, stopTokenIds: [9], logitBias: new Map([[0, -100]]) }, 4, 10)).not.toThrow();
  });
});

/**
 * A distribution shaped like llama.cpp's: sorted by probability, most likely first, float32
 * probabilities, with runs of equal values (listed in no particular id order, as std::sort leaves
 * them) and a tail of exact zeros (underflow).
 */
function llamaLike(rng: Rng, n: number): [number, number][] {
  const ids = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [ids[i], ids[j]] = [ids[j] as number, ids[i] as number];
  }
  const logits = ids.map(() => (rng.float() < 0.2 ? 3 : Math.round(rng.float() * 40) / 4 - 8));
  const zeros = rng.int(0, Math.floor(n / 4));
  for (let k = 0; k < zeros; k++) logits[k] = -200;
  const max = Math.max(...logits);
  const z = logits.reduce((a, l) => a + Math.exp(l - max), 0);
  const pairs = ids.map((id, k): [number, number] => [id, Math.fround(Math.exp((logits[k] as number) - max) / z)]);
  // Stable by probability only: equal probabilities keep their shuffled id order.
  return pairs.sort((a, b) => b[1] - a[1]);
}

describe("the fast sampler against the reference computation (full sort, full log-softmax)", () => {
  const same = (got: SampledToken, want: SampledToken): void => {
    expect(got.id).toBe(want.id);
    expect(Object.is(got.logprob, want.logprob)).toBe(true);
    expect(got.top).toEqual(want.top);
  };

  it("gives the same token and bit-identical logprobs, from a Map and from llama.cpp's flat pairs", () => {
    const gen = new Rng(2026);
    let reorders = 0;
    for (let trial = 0; trial < 400; trial++) {
      const dist = llamaLike(gen, gen.int(2, 301));
      const n = dist.length;
      const params: SamplingParams = {
        temperature: [0, 0.3, 0.7, 1, 1.6][trial % 5] as number,
        topP: trial % 3 === 0 ? 1 : 0.5 + gen.float() / 2,
        topLogprobs: trial % 4,
        // Controls reshape the order (the fast sampler then sorts); some trials have none.
        ...(trial % 7 === 1 ? { logitBias: new Map([[dist[n - 1]?.[0] as number, 30], [dist[0]?.[0] as number, -1.5]]) } : {}),
        ...(trial % 11 === 2 ? { suppress: new Set([dist[0]?.[0] as number]) } : {}),
      };
      if (params.logitBias || params.suppress) reorders++;
      const map = new Map(dist);
      const flat = dist.flat();
      for (const seed of [1, 2, 3]) {
        const pos = trial * 3 + seed;
        const want = referenceSampleToken(map, params, PositionKeyedRng.fromSeed(seed), pos);
        same(sampleToken(map, params, PositionKeyedRng.fromSeed(seed), pos), want);
        same(sampleTokenFromPairs(flat, params, PositionKeyedRng.fromSeed(seed), pos), want);
      }
      // A plain stream Rng advances the same way.
      const a = new Rng(trial);
      const b = new Rng(trial);
      for (let i = 0; i < 3; i++) same(sampleTokenFromPairs(flat, params, a, i), referenceSampleToken(map, params, b, i));
      expect(a.nextU32()).toBe(b.nextU32());
    }
    expect(reorders).toBeGreaterThan(50);
  });

  it("without controls at T = 1 works on p itself: logprobs equal log-softmax(log p) within 1e-9, normalised by Σp", () => {
    const gen = new Rng(7);
    const logSoftmax = (dist: [number, number][], id: number): number => {
      const lps = dist.map(([, p]) => (p > 0 ? Math.log(p) : -Infinity));
      const max = Math.max(...lps);
      const logZ = max + Math.log(lps.reduce((a, l) => a + Math.exp(l - max), 0));
      return (lps[dist.findIndex(([i]) => i === id)] as number) - logZ;
    };
    const params: SamplingParams = { temperature: 1, topP: 1, topLogprobs: 3 };
    expect(inProbabilityDomain(params)).toBe(true);
    for (let trial = 0; trial < 200; trial++) {
      const dist = llamaLike(gen, gen.int(2, 400));
      const t = sampleTokenFromPairs(dist.flat(), params, PositionKeyedRng.fromSeed(trial), trial);
      expect(Math.abs(t.logprob - logSoftmax(dist, t.id))).toBeLessThan(1e-9);
      for (const x of t.top) expect(Math.abs(x.logprob - logSoftmax(dist, x.id)) < 1e-9 || x.logprob === -Infinity).toBe(true);
    }
    // A distribution whose mass is not 1 (float32 rounding, here exaggerated) is renormalised.
    const half = sampleTokenFromPairs([5, 0.3, 2, 0.2], { temperature: 1, topP: 1, topLogprobs: 2 }, new Rng(1), 0);
    expect(half.top.map((x) => x.logprob)).toEqual([Math.log(0.3) - Math.log(0.5), Math.log(0.2) - Math.log(0.5)]);
    // Other temperatures and any control stay in the log domain.
    expect(inProbabilityDomain({ temperature: 0.7, topP: 1, topLogprobs: 0 })).toBe(false);
    expect(inProbabilityDomain({ temperature: 1, topP: 1, topLogprobs: 0, suppress: new Set([1]) })).toBe(false);
    expect(inProbabilityDomain({ temperature: 0, topP: 1, topLogprobs: 0, logitBias: new Map([[1, 1]]) })).toBe(false);
  });

  it("draws in proportion to p / Σp at T = 1 and never an impossible token", () => {
    const pairs = [0, 0.5, 3, 0.3, 1, 0.2, 2, 0];
    const counts = [0, 0, 0, 0];
    const n = 6000;
    for (let i = 0; i < n; i++) counts[sampleTokenFromPairs(pairs, { temperature: 1, topP: 1, topLogprobs: 0 }, PositionKeyedRng.fromSeed(11), i).id]! += 1;
    expect(counts[2]).toBe(0);
    for (const [id, q] of [[0, 0.5], [3, 0.3], [1, 0.2]] as const) {
      expect(Math.abs((counts[id] as number) / n - q)).toBeLessThan(5 * Math.sqrt((q * (1 - q)) / n));
    }
    expect(() => sampleTokenFromPairs([4, 0, 5, 0], { temperature: 1, topP: 1, topLogprobs: 0 }, new Rng(1), 0)).toThrow(/impossible/);
  });

  it("orders equal probabilities by id whatever order they arrive in", () => {
    const flat = [9, 0.25, 4, 0.25, 7, 0.25, 1, 0.125, 3, 0.125, 0, 0, 2, 0];
    const t = sampleTokenFromPairs(flat, { temperature: 0, topP: 1, topLogprobs: 7 }, new Rng(1), 0);
    expect(t.id).toBe(4);
    expect(t.top.map((x) => x.id)).toEqual([4, 7, 9, 1, 3, 0, 2]);
  });

  it("rejects an empty distribution", () => {
    expect(() => sampleTokenFromPairs([], { temperature: 1, topP: 1, topLogprobs: 0 }, new Rng(1), 0)).toThrow(/empty/);
  });
});
