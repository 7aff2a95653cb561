import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { configFromGguf, readGguf } from "../model/gguf.js";
import { tokenizerSpecFromGguf } from "../model/gguf-tokenizer.js";
import { DraftDistiller, truncatedPolicy, validateDraftModelOptions, type DraftModelOptions } from "./draft-distiller.js";
import { tfWasm } from "./tf-runtime.js";
import { TinyLlama } from "./tiny-llama.js";

// The shipped SFT policy: sharp next-token distributions, Arbor's vocabulary, 2 blocks.
const POLICY = new URL("../../models/calc-sft.gguf", import.meta.url).pathname;
const file = readGguf(POLICY);
const config = configFromGguf(file.metadata, POLICY);
const tokenizer = tokenizerSpecFromGguf(file.metadata, POLICY);
const OPTS: DraftModelOptions = { layers: 1, steps: 10, batch: 8, lr: 1e-4, topK: 8 };

let policy: TinyLlama;
const dir = mkdtempSync(join(tmpdir(), "arbor-draft-"));

beforeAll(async () => {
  await tfWasm();
  policy = new TinyLlama(config, file.tensors);
});
afterAll(() => {
  policy.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** Token sequences the policy has seen the like of: random runs over its vocabulary. */
function sequences(n: number, len: number, seed: number): number[][] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => Array.from({ length: len }, () => rng.int(0, config.nVocab - 1)));
}

describe("DraftDistiller", () => {
  it("lowers the Top-K KL to the policy on the rollout sequences", async () => {
    const d = await DraftDistiller.create(config, file.tensors, tokenizer, OPTS, 1);
    try {
      expect(d.config.nLayer).toBe(1);
      const r = d.distill(policy, sequences(8, 24, 2));
      expect(r.steps).toBe(10);
      expect(r.lossBefore).toBeGreaterThan(0);
      expect(r.lossAfter).toBeLessThan(0.8 * r.lossBefore);
    } finally {
      d.dispose();
    }
  });

  it("trains only the positions before generated tokens when they are marked", async () => {
    const d = await DraftDistiller.create(config, file.tensors, tokenizer, { ...OPTS, steps: 2, batch: 2 }, 1);
    try {
      const seqs = sequences(2, 12, 6).map((tokens) => ({ tokens, generated: tokens.map((_, i) => (i >= 8 ? 1 : 0)) }));
      const r = d.distill(policy, seqs);
      // Tokens 8..11 of each sequence were generated: rows 7..10 are trained.
      expect(r.positions).toBe(2 * 4);
      expect(r.lossAfter).toBeLessThan(r.lossBefore);
    } finally {
      d.dispose();
    }
  });

  it("starts as the policy itself when it keeps every block: KL 0 with the whole vocabulary as K", async () => {
    const d = await DraftDistiller.create(config, file.tensors, tokenizer, { ...OPTS, layers: config.nLayer, topK: config.nVocab, steps: 1 }, 1);
    try {
      expect(d.distill(policy, sequences(2, 10, 3)).lossBefore).toBeLessThan(1e-5);
    } finally {
      d.dispose();
    }
  });

  it("saves a GGUF with the policy's vocabulary and tokenizer, its own block count and the policy version", async () => {
    const d = await DraftDistiller.create(config, file.tensors, tokenizer, { ...OPTS, steps: 1 }, 1);
    try {
      d.distill(policy, sequences(2, 10, 4));
      const path = join(dir, "draft-v3.gguf");
      d.save(path, 3);
      const back = readGguf(path);
      const c = configFromGguf(back.metadata, path);
      expect(c).toEqual({ ...config, nLayer: 1 });
      expect(tokenizerSpecFromGguf(back.metadata, path).tokens).toEqual(tokenizer.tokens);
      expect(back.metadata.get("arbor.policy_version")).toBe(3);
      expect(back.tensors.map((t) => t.name)).toEqual(d.model.toTensors().map((t) => t.name));
    } finally {
      d.dispose();
    }
  });

  it("refuses no tokens, and options outside their ranges naming the field", async () => {
    const d = await DraftDistiller.create(config, file.tensors, tokenizer, { ...OPTS, steps: 1 }, 1);
    try {
      expect(() => d.distill(policy, [[], []])).toThrow(/no rollout tokens/);
      expect(() => d.distill(policy, [{ tokens: [1, 2, 3], generated: [0, 0, 0] }])).toThrow(/no generated token/);
      expect(() => d.distill(policy, [{ tokens: [1, 2, 3], generated: [0, 1] }])).toThrow(/generated has 2 entries for 3 tokens/);
    } finally {
      d.dispose();
    }
    expect(() => validateDraftModelOptions({ ...OPTS, layers: 3 }, config)).toThrow(/draftModel\.layers: must be an integer in 1\.\.2, got 3/);
    expect(() => validateDraftModelOptions({ ...OPTS, topK: 0 }, config)).toThrow(/draftModel\.topK/);
    expect(() => validateDraftModelOptions({ ...OPTS, lr: 0 }, config)).toThrow(/draftModel\.lr: must be a number > 0/);
    expect(() => validateDraftModelOptions({ ...OPTS, batch: 1.5 }, config)).toThrow(/draftModel\.batch/);
  });

  it("cuts the policy to its first blocks", () => {
    const names = truncatedPolicy(file.tensors, 1).map((t) => t.name);
    expect(names.some((n) => n.startsWith("blk.1."))).toBe(false);
    expect(names).toContain("blk.0.attn_q.weight");
    expect(names).toContain("output.weight");
    expect(names).toContain("token_embd.weight");
  });
});
