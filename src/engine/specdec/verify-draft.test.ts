import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { PositionKeyedRng } from "../position-keyed-rng.js";
import { sampleToken, type SampledToken } from "../sampling.js";
import { acceptedCount, verifyDraft } from "./verify-draft.js";

/** A distribution over tokens 0..n-1 from weights. */
const dist = (...w: number[]): Map<number, number> => {
  const z = w.reduce((a, b) => a + b, 0);
  return new Map(w.map((x, i) => [i, x / z]));
};
const greedy = (probs: ReadonlyMap<number, number>): SampledToken => sampleToken(probs, { temperature: 0, topP: 1, topLogprobs: 0 }, new Rng(0), 0);
const never = (): boolean => false;

describe("verifyDraft", () => {
  it("accepts the draft while it equals the target's token, then emits the target's token", () => {
    const dists = [dist(1, 5, 1), dist(1, 1, 5), dist(5, 1, 1), dist(1, 5, 1)];
    const out = verifyDraft([1, 2, 1], dists, greedy, never);
    expect(out.map((t) => t.id)).toEqual([1, 2, 0]);
    expect(acceptedCount([1, 2, 1], out)).toBe(2);
  });

  it("emits the bonus token when the whole draft is accepted, and stops where a token ends the run", () => {
    const dists = [dist(1, 5), dist(5, 1), dist(1, 5)];
    expect(verifyDraft([1, 0], dists, greedy, never).map((t) => t.id)).toEqual([1, 0, 1]);
    expect(verifyDraft([1, 0], dists, greedy, (t) => t.id === 0).map((t) => t.id)).toEqual([1, 0]);
    expect(verifyDraft([1, 0], dists, greedy, (_t, n) => n >= 1).map((t) => t.id)).toEqual([1]);
  });

  it("samples with temperature what the non-speculative path samples, position by position", () => {
    const dists = Array.from({ length: 6 }, (_, i) => dist(1 + i, 2, 3, 1));
    for (const seed of [1, 2, 3, 4, 5]) {
      const params = { temperature: 1, topP: 1, topLogprobs: 0 };
      // Without speculation: one token per position from the same Rng.
      const plainRng = PositionKeyedRng.fromSeed(seed);
      const want = dists.map((d, i) => sampleToken(d, params, plainRng, 10 + i).id);
      // A draft that is right for its first 3 tokens, then wrong.
      const draft = [...want.slice(0, 3), (want[3]! + 1) % 4, 0];
      const rng = PositionKeyedRng.fromSeed(seed);
      const out = verifyDraft(draft, dists, (p, i) => sampleToken(p, params, rng, 10 + i), never);
      expect(out.map((t) => t.id)).toEqual(want.slice(0, 4));
    }
  });

  it("refuses a distribution count that does not match the draft", () => {
    expect(() => verifyDraft([1, 2], [dist(1, 1)], greedy, never)).toThrow(/2 draft tokens need 3 distributions, got 1/);
  });
});
