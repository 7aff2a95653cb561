// The converted files run in llama.cpp exactly as the originals: tiny policy → HF → GGUF gives the
// engine's logprobs of the original (≤ 1e-5) and the reference trainer loading the converted GGUF agrees
// with the engine (≤ 1e-4, trainer/engine-agreement.test.ts's bound); a control shows a conversion that
// skips the RoPE permutation is caught. A made-here qwen2 checkpoint (BF16) converts to a GGUF llama.cpp
// loads, tokenizes with its merges and scores with finite logprobs; a byte-level BPE round trip
// tokenizes as the original.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ControlledEvaluateInputItem, Token } from "node-llama-cpp";
import { afterAll, describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { openLlamaContext } from "../../engine/llama-context.js";
import { engineAgreement } from "../../testing/engine-agreement.js";
import { SPM_MERGED, byteLevelVocab, writeByteLevelGguf, writeQwen2Checkpoint, writeSpmGguf } from "../../testing/hf-fixtures.js";
import { Trainer } from "../../trainer/trainer.js";
import { tinyConfig } from "../config.js";
import { readGguf, writeGguf } from "../gguf.js";
import { readSafetensors } from "../safetensors.js";
import { Vocab } from "../vocab.js";
import { initWeights, type Tensor } from "../weights.js";
import { convertHfToGguf } from "./hf-convert.js";
import { exportHfCheckpoint } from "./hf-export.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-hf-engine-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Engine next-token log-probabilities of `tokens[t+1]` after `tokens[0..t]`, one per position. */
async function engineLogprobs(path: string, sequences: readonly (readonly number[])[]): Promise<number[]> {
  const longest = Math.max(...sequences.map((s) => s.length));
  const { model, context } = await openLlamaContext({ modelPath: path, sequences: 1, contextSize: Math.max(64, longest), exactKv: true });
  const out: number[] = [];
  try {
    const seq = context.getSequence();
    for (const tokens of sequences) {
      await seq.clearHistory();
      const items = tokens.map((id): ControlledEvaluateInputItem => [id as Token, { generateNext: { probabilities: true, options: { temperature: 0 } } }]);
      const res = await seq.controlledEvaluate(items);
      for (let t = 0; t + 1 < tokens.length; t++) out.push(Math.log(res[t]?.next.probabilities?.get(tokens[t + 1] as Token) ?? 0));
    }
  } finally {
    await context.dispose();
    await model.dispose();
  }
  return out;
}

const maxDiff = (a: number[], b: number[]): number => Math.max(...a.map((x, i) => Math.abs(x - (b[i] as number))));

describe("tiny policy → HF → GGUF in llama.cpp and the trainer", () => {
  const vocab = new Vocab();
  const cfg = tinyConfig({ nVocab: vocab.size, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 512 });
  const rng = new Rng(7);
  // Weights far from init (peaked distributions), as trainer/engine-agreement.test.ts uses: a wrong
  // head layout or RoPE order then moves logprobs by far more than rounding.
  const tensors = initWeights(cfg, new Rng(3)).map((t) => ({ ...t, data: t.data.map((x) => (t.name.includes("norm") ? 1 + 0.3 * rng.normal() : x * 25)) }));
  const original = join(dir, "policy.gguf");
  writeGguf(original, { config: cfg, vocab, tensors, metadata: { "general.name": "arbor-tiny-llama", "arbor.policy_version": 4 } });
  exportHfCheckpoint(original, join(dir, "hf"));
  const converted = convertHfToGguf(join(dir, "hf"), join(dir, "converted.gguf")).path;
  const sequences = [90, 40, 13].map((n) => [vocab.bosId, ...Array.from({ length: n }, () => rng.int(3, vocab.size - 1))]);

  it("the engine's logprobs on the converted file equal the original's within 1e-5", async () => {
    const a = await engineLogprobs(original, sequences);
    const b = await engineLogprobs(converted, sequences);
    expect(a).toHaveLength(90 + 40 + 13);
    expect(a.every(Number.isFinite)).toBe(true);
    expect(maxDiff(a, b)).toBeLessThanOrEqual(1e-5);
  }, 60_000);

  it("the reference trainer loading the converted GGUF agrees with the engine within 1e-4", async () => {
    const tr = await Trainer.fromGguf(converted);
    try {
      const stats = await engineAgreement(tr.model, converted, sequences);
      expect(stats.positions).toBe(90 + 40 + 13);
      expect(stats.maxAbsLogprobDiff).toBeLessThanOrEqual(1e-4);
      expect(stats.maxAbsProbDiff).toBeLessThanOrEqual(2e-5);
    } finally {
      tr.dispose();
    }
  }, 60_000);

  it("control: a GGUF made from the HF weights without the RoPE permutation scores differently", async () => {
    // The HF file's q/k rows, copied as they are (what a converter that forgot LlamaModel.permute writes).
    const hf = new Map(readSafetensors(join(dir, "hf", "model.safetensors")).tensors.map((t) => [t.name, t as Tensor]));
    const g = readGguf(converted);
    const wrong = g.tensors.map((t) => {
      const m = /^blk\.(\d+)\.attn_(q|k)\.weight$/.exec(t.name);
      return m ? { ...t, data: hf.get(`model.layers.${m[1]}.self_attn.${m[2]}_proj.weight`)!.data } : t;
    });
    const path = join(dir, "unpermuted.gguf");
    const meta = readGguf(original);
    writeGguf(path, { config: cfg, vocab, tensors: wrong, metadata: { "general.name": String(meta.metadata.get("general.name")) } });
    const a = await engineLogprobs(original, sequences);
    const b = await engineLogprobs(path, sequences);
    expect(maxDiff(a, b)).toBeGreaterThan(1e-2);
  }, 60_000);
});

describe("made-here checkpoints in llama.cpp", () => {
  it("a qwen2 checkpoint in BF16 converts to a GGUF llama.cpp loads, tokenizes with its merges and scores", async () => {
    const src = join(dir, "qwen");
    writeQwen2Checkpoint(src, { dtype: "BF16" });
    const path = convertHfToGguf(src, join(dir, "qwen.gguf")).path;
    const { tokens } = byteLevelVocab();
    const { model, context } = await openLlamaContext({ modelPath: path, sequences: 1, contextSize: 64 });
    let ids: number[];
    try {
      // " the" merges through "Ġ t" then "Ġt he", "er" and "cal" by theirs; the special token's text is read as the token.
      ids = model.tokenize("<|im_start|>user\n the cal", true).map(Number);
      expect(ids).toEqual([tokens.indexOf("<|im_start|>"), tokens.indexOf("u"), tokens.indexOf("s"), tokens.indexOf("er"), tokens.indexOf("Ċ"), tokens.indexOf("Ġthe"), tokens.indexOf("Ġc"), tokens.indexOf("al")]);
      expect(model.detokenize(ids.map((i) => i as Token), true)).toBe("<|im_start|>user\n the cal");
    } finally {
      await context.dispose();
      await model.dispose();
    }
    const lp = await engineLogprobs(path, [ids]);
    expect(lp).toHaveLength(ids.length - 1);
    expect(lp.every((x) => Number.isFinite(x) && x < 0)).toBe(true);
  }, 60_000);

  it("a byte-level BPE GGUF → HF → GGUF tokenizes and scores as the original", async () => {
    const original = join(dir, "bpe.gguf");
    writeByteLevelGguf(original, { seed: 4 });
    exportHfCheckpoint(original, join(dir, "hf-bpe"));
    const back = convertHfToGguf(join(dir, "hf-bpe"), join(dir, "bpe-back.gguf")).path;
    const text = "<|im_start|>system\nThe sum: 1 + 2 = 3, and the cat's café.<|im_end|>\n";
    const tokenize = async (p: string): Promise<number[]> => {
      const { model, context } = await openLlamaContext({ modelPath: p, sequences: 1, contextSize: 64 });
      try {
        return model.tokenize(text, true).map(Number);
      } finally {
        await context.dispose();
        await model.dispose();
      }
    };
    const a = await tokenize(original);
    expect(a.length).toBeGreaterThan(10);
    expect(await tokenize(back)).toEqual(a);
    expect(maxDiff(await engineLogprobs(original, [a]), await engineLogprobs(back, [a]))).toBeLessThanOrEqual(1e-5);
  }, 60_000);
});


describe("a SentencePiece-style vocabulary with merges → HF → GGUF", () => {
  it("exports merges from the scores and converts back to scores llama.cpp tokenizes with identically", async () => {
    const original = join(dir, "spm.gguf");
    const { tokens } = writeSpmGguf(original);
    exportHfCheckpoint(original, join(dir, "hf-spm"));
    const tj = JSON.parse(readFileSync(join(dir, "hf-spm", "tokenizer.json"), "utf8")) as { model: { merges: string[] }; normalizer: { normalizers: { type: string }[] } };
    // transformers' generate_merges: every split of a merged piece into two pieces, best-scored piece first.
    expect(tj.model.merges).toEqual(["\u2581 t", "h e", "\u2581t he", "i n", "e r", "\u2581 a", "a n", "\u2581 c", "a t", "\u2581c at", "o n"]);
    expect(tj.normalizer.normalizers.map((n) => n.type)).toEqual(["Prepend", "Replace"]);
    const back = convertHfToGguf(join(dir, "hf-spm"), join(dir, "spm-back.gguf")).path;
    const g = readGguf(back);
    expect(g.metadata.get("tokenizer.ggml.tokens")).toEqual(tokens);
    expect(g.metadata.get("tokenizer.ggml.add_space_prefix")).toBe(true);
    expect(g.metadata.get("tokenizer.ggml.eot_token_id")).toBe(tokens.indexOf("<|eot_id|>"));
    const scores = g.metadata.get("tokenizer.ggml.scores") as number[];
    // Merged pieces keep their order of preference; pieces no merge makes score 0.
    const merged = SPM_MERGED.map((p) => scores[tokens.indexOf(p)] as number);
    expect([...merged].sort((x, y) => y - x)).toEqual(merged);
    expect(scores[tokens.indexOf("a")]).toBe(0);
    const texts = ["the cat sat on the mat", "Then, an eater at the inn! ünïcödé ☃", "<|start_header_id|>user<|end_header_id|>\n\nthe cat<|eot_id|>"];
    const tokenize = async (p: string): Promise<number[][]> => {
      const { model, context } = await openLlamaContext({ modelPath: p, sequences: 1, contextSize: 64 });
      try {
        return texts.map((t) => model.tokenize(t, true).map(Number));
      } finally {
        await context.dispose();
        await model.dispose();
      }
    };
    const a = await tokenize(original);
    expect(a[0]).toContain(tokens.indexOf("\u2581the"));
    expect(a[0]).toContain(tokens.indexOf("\u2581cat"));
    expect(await tokenize(back)).toEqual(a);
  }, 60_000);
});

describe("bad GGUFs given to the trainer: one line naming the file and the reason", () => {
  it("a qwen2 GGUF (an architecture the trainer does not run)", async () => {
    const src = join(dir, "qwen-t");
    writeQwen2Checkpoint(src, { dtype: "F16" });
    const path = convertHfToGguf(src, join(dir, "qwen-t.gguf")).path;
    await expect(Trainer.fromGguf(path)).rejects.toThrow(`${path}: GGUF architecture 'qwen2' is not supported here (Arbor's trainer and HF export run 'llama' only)`);
  });

  it("a quantized GGUF, naming the ggml type", async () => {
    const path = join(dir, "q8.gguf");
    const name = Buffer.from("token_embd.weight");
    const u32 = (v: number): Buffer => Buffer.from(Uint32Array.of(v).buffer);
    const u64 = (v: number): Buffer => Buffer.from(BigUint64Array.of(BigInt(v)).buffer);
    const head = Buffer.concat([Buffer.from("GGUF"), u32(3), u64(1), u64(0), u64(name.length), name, u32(2), u64(32), u64(4), u32(8), u64(0)]);
    writeFileSync(path, Buffer.concat([head, Buffer.alloc(96 - head.length), Buffer.alloc(4 * 34)]));
    await expect(Trainer.fromGguf(path)).rejects.toThrow(`${path}: tensor token_embd.weight is Q8_0 (ggml type 8), a quantized or non-float type; Arbor reads only F32, F16 and BF16 GGUF weights`);
  });
});
