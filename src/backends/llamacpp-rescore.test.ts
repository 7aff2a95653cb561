// Rescoring the positions llama-server left without probabilities: what each scoring request asks
// for, and the policy logprob (greedy raw, tempered, top-p renormalised) computed from the answer.
import { describe, expect, it } from "vitest";
import { placeEntries, rescoreLogprobs, type RescoreDeps } from "./llamacpp-rescore.js";

// A 4-token vocabulary whose raw distribution is the same at every position.
const RAW = new Map([
  [10, Math.log(0.5)],
  [11, Math.log(0.3)],
  [12, Math.log(0.15)],
  [13, Math.log(0.05)],
]);

/** `shortTop`: how many entries a short (non whole-vocabulary) request gets, as if the vocabulary were larger. */
function deps(seen: object[], shortTop?: number): RescoreDeps {
  return {
    async complete(body) {
      seen.push(body);
      const n = (body as { n_probs: number }).n_probs;
      const top = [...RAW].slice(0, n < 1 << 24 && shortTop !== undefined ? shortTop : n).map(([id, logprob]) => ({ id, logprob }));
      return { tokens: [2], completion_probabilities: [{ id: 2, logprob: -9, top_logprobs: top }] };
    },
    eosId: async () => 2,
    extra: { chat_parser: "x" },
    protocolError: (p) => new Error(p),
  };
}

describe("rescoreLogprobs", () => {
  it("asks for one token per output position on the same slot, its prefix as the prompt, EOS forced", async () => {
    const seen: object[] = [];
    const lps = await rescoreLogprobs(deps(seen), { prompt: [1, 5], output: [10, 11], temperature: 0, topP: 1, idSlot: 2 });
    expect(lps).toEqual([Math.log(0.5), Math.log(0.3)]);
    expect(await rescoreLogprobs(deps([]), { prompt: [1, 5], output: [10, 11, 12], positions: [2], temperature: 0, topP: 1, idSlot: 2 })).toEqual([Math.log(0.15)]);
    expect(seen).toEqual([
      expect.objectContaining({ prompt: [1, 5], n_predict: 1, temperature: 0, logit_bias: [[2, 1000]], id_slot: 2, chat_parser: "x", cache_prompt: true }),
      expect.objectContaining({ prompt: [1, 5, 10], n_predict: 1, id_slot: 2 }),
    ]);
  });

  it("asks for the whole distribution when a greedy token is not in the short top list", async () => {
    const seen: object[] = [];
    const lps = await rescoreLogprobs(deps(seen, 2), { prompt: [1], output: [13], temperature: 0, topP: 1, idSlot: 0 });
    expect(lps).toEqual([Math.log(0.05)]);
    expect(seen.map((b) => (b as { n_probs: number }).n_probs)).toEqual([8, 1 << 24]);
  });

  it("applies the temperature, then renormalises over the top-p nucleus", async () => {
    const T = 0.5;
    const z = [0.5, 0.3, 0.15, 0.05].reduce((a, p) => a + p ** (1 / T), 0);
    const q = (p: number) => p ** (1 / T) / z;
    const [t1] = await rescoreLogprobs(deps([]), { prompt: [1], output: [11], temperature: T, topP: 1, idSlot: 0 });
    expect(t1).toBeCloseTo(Math.log(q(0.3)), 12);
    // At T = 0.5, q = 0.685, 0.247, 0.062, 0.007: a 0.95 nucleus needs the first three (0.932 < 0.95).
    const kept = q(0.5) + q(0.3) + q(0.15);
    const [t2] = await rescoreLogprobs(deps([]), { prompt: [1], output: [12], temperature: T, topP: 0.95, idSlot: 0 });
    expect(t2).toBeCloseTo(Math.log(q(0.15) / kept), 12);
    await expect(rescoreLogprobs(deps([]), { prompt: [1], output: [13], temperature: T, topP: 0.95, idSlot: 0 })).rejects.toThrow(/outside the top-p 0.95 nucleus/);
  });

  it("fails clearly when the server has no probability for the token at all", async () => {
    // Token 99 is not in the vocabulary the server reports.
    await expect(rescoreLogprobs(deps([]), { prompt: [1], output: [99], temperature: 0, topP: 1, idSlot: 0 })).rejects.toThrow(/no probability for output token 0 \(id 99\)/);
  });
});

describe("placeEntries", () => {
  it("places the entries of the tokens the server did not skip", () => {
    expect(placeEntries([5, 9], [5, 7, 8, 9])).toEqual([0, 3]);
    expect(placeEntries([], [7, 8])).toEqual([]);
  });

  it("refuses entries that do not fit the tokens, or fit them in more than one way", () => {
    expect(placeEntries([5, 6], [5, 7])).toBeUndefined();
    // Two equal tokens, one entry: the first or the second one could have been skipped.
    expect(placeEntries([130], [195, 130, 130])).toBeUndefined();
  });
});
