// Weight tensors of the tiny llama policy, named as in GGUF, and their seeded random initialisation.
//
// Shapes are row-major (numpy / PyTorch order); ggml lists dims fastest-first, i.e. reversed:
//   token_embd.weight  [nVocab, nEmbd]            ggml [nEmbd, nVocab]   (row t = embedding of token t)
//   blk.N.attn_norm    [nEmbd]                    ggml [nEmbd]
//   blk.N.attn_q       [nHead*headDim, nEmbd]     ggml [nEmbd, nEmbd]
//   blk.N.attn_k/v     [nHeadKv*headDim, nEmbd]   ggml [nEmbd, nHeadKv*headDim]
//   blk.N.attn_output  [nEmbd, nHead*headDim]     ggml [nEmbd, nEmbd]
//   blk.N.ffn_norm     [nEmbd]                    ggml [nEmbd]
//   blk.N.ffn_gate/up  [nFf, nEmbd]               ggml [nEmbd, nFf]
//   blk.N.ffn_down     [nEmbd, nFf]               ggml [nFf, nEmbd]
//   output_norm.weight [nEmbd]; output.weight [nVocab, nEmbd] (untied from token_embd)
// Every matrix is applied as y = W·x with W [out, in] (PyTorch nn.Linear convention). llama.cpp
// runs architecture "llama" with RoPE in NORM mode: it rotates adjacent pairs (x[2i], x[2i+1]) of
// each head by pos·base^(-2i/headDim); q/k are NOT permuted as in HF conversions.

import type { Rng } from "../core/rng.js";
import { headDim, validateConfig, type TinyLlamaConfig } from "./config.js";

/** One named tensor, row-major float32. */
export type Tensor = { name: string; shape: number[]; data: Float32Array };

/** Standard deviation of matrix weights at initialisation. */
export const INIT_STD = 0.02;

/** Names and row-major shapes of every tensor of a config, in GGUF write order. */
export function expectedShapes(cfg: TinyLlamaConfig): { name: string; shape: number[] }[] {
  validateConfig(cfg);
  const hd = headDim(cfg);
  const q = cfg.nHead * hd;
  const kv = cfg.nHeadKv * hd;
  const out: { name: string; shape: number[] }[] = [{ name: "token_embd.weight", shape: [cfg.nVocab, cfg.nEmbd] }];
  for (let l = 0; l < cfg.nLayer; l++) {
    const p = `blk.${l}.`;
    out.push(
      { name: `${p}attn_norm.weight`, shape: [cfg.nEmbd] },
      { name: `${p}attn_q.weight`, shape: [q, cfg.nEmbd] },
      { name: `${p}attn_k.weight`, shape: [kv, cfg.nEmbd] },
      { name: `${p}attn_v.weight`, shape: [kv, cfg.nEmbd] },
      { name: `${p}attn_output.weight`, shape: [cfg.nEmbd, q] },
      { name: `${p}ffn_norm.weight`, shape: [cfg.nEmbd] },
      { name: `${p}ffn_gate.weight`, shape: [cfg.nFf, cfg.nEmbd] },
      { name: `${p}ffn_up.weight`, shape: [cfg.nFf, cfg.nEmbd] },
      { name: `${p}ffn_down.weight`, shape: [cfg.nEmbd, cfg.nFf] },
    );
  }
  out.push({ name: "output_norm.weight", shape: [cfg.nEmbd] }, { name: "output.weight", shape: [cfg.nVocab, cfg.nEmbd] });
  return out;
}

/** Number of elements of a shape. */
export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Seeded random weights: norms 1, matrices N(0, 0.02²), and the projections that write into the
 * residual stream (attn_output, ffn_down) scaled by 1/sqrt(2·nLayer) as in GPT-2. Each tensor draws
 * from `rng.fork(name)`, so a tensor's values depend only on the seed and its name.
 */
export function initWeights(cfg: TinyLlamaConfig, rng: Rng): Tensor[] {
  const residualStd = INIT_STD / Math.sqrt(2 * cfg.nLayer);
  return expectedShapes(cfg).map(({ name, shape }) => {
    const data = new Float32Array(numel(shape));
    if (name.endsWith("norm.weight")) {
      data.fill(1);
    } else {
      const std = /attn_output|ffn_down/.test(name) ? residualStd : INIT_STD;
      const r = rng.fork(name);
      for (let i = 0; i < data.length; i++) data[i] = r.normal(0, std);
    }
    return { name, shape, data };
  });
}

/**
 * Check that `tensors` are exactly the tensors of `cfg` (names, shapes, data lengths); throws a
 * RangeError naming the first problem.
 */
export function checkTensors(cfg: TinyLlamaConfig, tensors: readonly Tensor[]): void {
  const byName = new Map<string, Tensor>();
  for (const t of tensors) {
    if (byName.has(t.name)) throw new RangeError(`tensor ${t.name}: appears twice`);
    byName.set(t.name, t);
    if (t.data.length !== numel(t.shape)) {
      throw new RangeError(`tensor ${t.name}: data has ${t.data.length} values, shape [${t.shape}] needs ${numel(t.shape)}`);
    }
  }
  const expected = expectedShapes(cfg);
  for (const { name, shape } of expected) {
    const t = byName.get(name);
    if (!t) throw new RangeError(`tensor ${name}: missing`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new RangeError(`tensor ${name}: shape [${t.shape}] but the config needs [${shape}]`);
    }
  }
  if (tensors.length !== expected.length) {
    const known = new Set(expected.map((e) => e.name));
    const extra = tensors.find((t) => !known.has(t.name));
    throw new RangeError(`tensor ${extra?.name ?? "?"}: not part of a llama model with this config`);
  }
}
