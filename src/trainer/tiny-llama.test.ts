import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { initWeights } from "../model/weights.js";
import { causalMask } from "./attention-mask.js";
import { tfWasm } from "./tf-runtime.js";
import { TinyLlama } from "./tiny-llama.js";

beforeAll(async () => {
  await tfWasm();
});

const cfg = tinyConfig({ nVocab: 10, nEmbd: 8, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 16, contextLength: 64 });

describe("TinyLlama", () => {
  it("holds the GGUF tensors as variables and gives them back unchanged; two instances coexist", () => {
    const tensors = initWeights(cfg, new Rng(3));
    const a = new TinyLlama(cfg, tensors);
    const b = new TinyLlama(cfg, tensors);
    try {
      expect(a.toTensors()).toEqual(tensors);
      expect(a.scope).not.toBe(b.scope);
      expect(a.nameOf(`${a.scope}/output.weight`)).toBe("output.weight");
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it("is causal: a token's distribution does not depend on later tokens", () => {
    const m = new TinyLlama(cfg, initWeights(cfg, new Rng(4)).map((t) => ({ ...t, data: t.data.map((x) => x * 30) })));
    try {
      const run = (tokens: number[]) =>
        tf.tidy(() => Array.from(m.logprobs(m.hidden(tokens, tokens.map((_, i) => i), { kind: "dense", mask: causalMask(tokens.length) }), [0, 1], [5, 6]).dataSync()));
      const a = run([1, 2, 3, 4]);
      const b = run([1, 2, 7, 8]);
      expect(b).toEqual(a);
      expect(run([1, 3, 3, 4])[1]).not.toBe(a[1]);
    } finally {
      m.dispose();
    }
  });

  it("rejects out-of-vocabulary tokens, mismatched positions and masks, and wrong tensor sets", () => {
    const m = new TinyLlama(cfg, initWeights(cfg, new Rng(5)));
    try {
      const mask = { kind: "dense", mask: causalMask(2) } as const;
      expect(() => tf.tidy(() => m.hidden([1, 10], [0, 1], mask))).toThrow(/token 10 at 1 is outside the vocabulary/);
      expect(() => tf.tidy(() => m.hidden([1, 2], [0], mask))).toThrow(/2 tokens need 2 positions/);
      expect(() => tf.tidy(() => m.hidden([1, 2, 3], [0, 1, 2], mask))).toThrow(/3 tokens need an 3×3 mask/);
      expect(() => new TinyLlama(cfg, initWeights(cfg, new Rng(5)).slice(1))).toThrow(/token_embd.weight: missing/);
    } finally {
      m.dispose();
    }
  });
});
