// Tensor names and layouts between Hugging Face llama/qwen2 checkpoints and GGUF, as llama.cpp's
// convert_hf_to_gguf.py maps them. The one layout difference is RoPE: llama.cpp runs architecture
// "llama" in NORM mode (rotating adjacent pairs of a head), while HF's LlamaAttention rotates the
// two halves of a head, so HF q/k rows are a permutation of GGUF's (`LlamaModel.permute`). Qwen2 runs
// in NEOX mode in llama.cpp, the halves as in HF, so its q/k are copied as they are.

import type { Tensor } from "../weights.js";

/** GGUF name of a Hugging Face llama/qwen2 tensor name, or undefined when llama.cpp has none. */
export function ggufTensorName(hfName: string): string | undefined {
  const fixed: Record<string, string> = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
  };
  if (fixed[hfName]) return fixed[hfName];
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(hfName);
  if (!m) return undefined;
  const part = LAYER_PARTS[m[2] as string];
  return part === undefined ? undefined : `blk.${m[1]}.${part}.${m[3]}`;
}

/** Hugging Face name of a GGUF llama/qwen2 tensor name, or undefined when HF has none. */
export function hfTensorName(ggufName: string): string | undefined {
  const fixed: Record<string, string> = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
  };
  if (fixed[ggufName]) return fixed[ggufName];
  const m = /^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$/.exec(ggufName);
  if (!m) return undefined;
  const hf = Object.entries(LAYER_PARTS).find(([, g]) => g === m[2])?.[0];
  return hf === undefined ? undefined : `model.layers.${m[1]}.${hf}.${m[3]}`;
}

const LAYER_PARTS: Record<string, string> = {
  input_layernorm: "attn_norm",
  "self_attn.q_proj": "attn_q",
  "self_attn.k_proj": "attn_k",
  "self_attn.v_proj": "attn_v",
  "self_attn.o_proj": "attn_output",
  post_attention_layernorm: "ffn_norm",
  "mlp.gate_proj": "ffn_gate",
  "mlp.up_proj": "ffn_up",
  "mlp.down_proj": "ffn_down",
};

/**
 * HF → GGUF row order of a llama q or k projection ([nHeads·headDim, …], also a bias): within each
 * head, row j·headDim/2 + i moves to row 2i + j (convert_hf_to_gguf.py `LlamaModel.permute`: reshape
 * (heads, 2, headDim/2, …), swap axes 1 and 2).
 */
export function permuteRopeRows(t: Tensor, nHeads: number): Tensor {
  return moveRows(t, nHeads, (half, i, j) => [j * half + i, 2 * i + j]);
}

/** The inverse of {@link permuteRopeRows}: GGUF → HF row order. */
export function unpermuteRopeRows(t: Tensor, nHeads: number): Tensor {
  return moveRows(t, nHeads, (half, i, j) => [2 * i + j, j * half + i]);
}

function moveRows(t: Tensor, nHeads: number, map: (half: number, i: number, j: number) => [from: number, to: number]): Tensor {
  const rows = t.shape[0] as number;
  if (rows % nHeads !== 0 || (rows / nHeads) % 2 !== 0) {
    throw new RangeError(`tensor ${t.name}: ${rows} rows do not split into ${nHeads} heads of even size (RoPE permutation)`);
  }
  const headDim = rows / nHeads;
  const half = headDim / 2;
  const width = t.data.length / rows;
  const out = new Float32Array(t.data.length);
  for (let h = 0; h < nHeads; h++) {
    for (let i = 0; i < half; i++) {
      for (let j = 0; j < 2; j++) {
        const [from, to] = map(half, i, j);
        const src = (h * headDim + from) * width;
        out.set(t.data.subarray(src, src + width), (h * headDim + to) * width);
      }
    }
  }
  return { name: t.name, shape: [...t.shape], data: out };
}
