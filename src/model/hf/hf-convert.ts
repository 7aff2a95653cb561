// `arbor hf convert`: a Hugging Face llama or qwen2 checkpoint (F32, F16 or BF16 safetensors, single
// or sharded) as an F32 GGUF that llama.cpp serves, with the keys, tensor names and tokenizer metadata
// llama.cpp's convert_hf_to_gguf.py writes for these architectures:
//   llama: `llama.*` keys, q/k rows permuted into llama.cpp's RoPE order (hf-tensors.ts);
//   qwen2: `qwen2.*` keys, q/k/v biases, q/k as they are (llama.cpp runs qwen2 RoPE in NEOX order).
// A tied checkpoint (no lm_head) gets no output.weight: llama.cpp then uses token_embd, as for any
// convert_hf_to_gguf.py output.

import { basename } from "node:path";
import { writeGgufRaw, type MetaValue } from "../gguf.js";
import type { Tensor } from "../weights.js";
import { tokenizerMetadata } from "../gguf-tokenizer.js";
import { readHfCheckpoint, type HfCheckpoint } from "./hf-checkpoint.js";
import { ggufTensorName, permuteRopeRows } from "./hf-tensors.js";
import { ggufTokenizerFromHf } from "./hf-tokenizer-import.js";

/** GGUF `general.file_type` of an all-F32 file (llama_ftype LLAMA_FTYPE_ALL_F32). */
const FILE_TYPE_ALL_F32 = 0;

/** Model hyper-parameters read from config.json. */
export interface HfModelShape {
  arch: "llama" | "qwen2";
  hidden: number;
  ff: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
  context: number;
  rmsEps: number;
  ropeTheta: number;
  tied: boolean;
}

/** What {@link convertHfToGguf} wrote. */
export interface HfConvertResult {
  path: string;
  arch: "llama" | "qwen2";
  tensors: number;
  vocab: number;
  tokenizer: "llama" | "gpt2";
  pre?: string;
  /** Stored dtypes of the source weights, with counts. */
  dtypes: Record<string, number>;
}

/** Convert the checkpoint in `dir` to an F32 GGUF at `outPath` (written atomically). */
export function convertHfToGguf(dir: string, outPath: string): HfConvertResult {
  const ckpt = readHfCheckpoint(dir);
  const shape = modelShape(ckpt);
  const tensors = ggufTensors(ckpt, shape);
  const tok = ggufTokenizerFromHf(ckpt.tokenizer, shape.vocab);
  const a = shape.arch;
  const nameOf = ckpt.config.json._name_or_path;
  const meta: [string, MetaValue][] = [
    ["general.architecture", { type: "string", value: a }],
    ["general.alignment", { type: "u32", value: 32 }],
    ["general.name", { type: "string", value: typeof nameOf === "string" && nameOf !== "" ? basename(nameOf) : basename(dir) }],
    ["general.file_type", { type: "u32", value: FILE_TYPE_ALL_F32 }],
    [`${a}.block_count`, { type: "u32", value: shape.layers }],
    [`${a}.context_length`, { type: "u32", value: shape.context }],
    [`${a}.embedding_length`, { type: "u32", value: shape.hidden }],
    [`${a}.feed_forward_length`, { type: "u32", value: shape.ff }],
    [`${a}.attention.head_count`, { type: "u32", value: shape.heads }],
    [`${a}.attention.head_count_kv`, { type: "u32", value: shape.kvHeads }],
    [`${a}.rope.freq_base`, { type: "f32", value: shape.ropeTheta }],
    [`${a}.attention.layer_norm_rms_epsilon`, { type: "f32", value: shape.rmsEps }],
  ];
  if (a === "llama") {
    // LlamaModel.set_gguf_parameters adds these two.
    meta.push(["llama.vocab_size", { type: "u32", value: shape.vocab }], ["llama.rope.dimension_count", { type: "u32", value: shape.headDim }]);
  }
  try {
    meta.push(...tokenizerMetadata(tok));
  } catch (err) {
    // The tokenizer came from the checkpoint's files, so a bad one is the checkpoint's fault: name it.
    throw new Error(`${dir}: ${(err as Error).message}`, { cause: err });
  }
  writeGgufRaw(outPath, meta, tensors);
  const dtypes: Record<string, number> = {};
  for (const w of ckpt.weights.values()) dtypes[w.dtype] = (dtypes[w.dtype] ?? 0) + 1;
  return { path: outPath, arch: a, tensors: tensors.length, vocab: shape.vocab, tokenizer: tok.model, ...(tok.pre !== undefined ? { pre: tok.pre } : {}), dtypes };
}

/** The hyper-parameters of a checkpoint's config.json, checked; errors name config.json and the field. */
export function modelShape(ckpt: HfCheckpoint): HfModelShape {
  const { path, json } = ckpt.config;
  const int = (key: string, fallback?: number): number => {
    const v = json[key] ?? fallback;
    if (typeof v !== "number" || !Number.isInteger(v) || v <= 0) throw new Error(`${path}: ${key} must be a positive integer (got ${JSON.stringify(json[key])})`);
    return v;
  };
  const pos = (key: string, fallback: number): number => {
    const v = json[key] ?? fallback;
    if (typeof v !== "number" || !(v > 0)) throw new Error(`${path}: ${key} must be a positive number (got ${JSON.stringify(json[key])})`);
    return v;
  };
  const hidden = int("hidden_size");
  const heads = int("num_attention_heads");
  const kvHeads = int("num_key_value_heads", heads);
  if (hidden % heads !== 0) throw new Error(`${path}: hidden_size ${hidden} is not divisible by num_attention_heads ${heads}`);
  if (heads % kvHeads !== 0) throw new Error(`${path}: num_attention_heads ${heads} is not divisible by num_key_value_heads ${kvHeads}`);
  const headDim = hidden / heads;
  if (json.head_dim !== undefined && json.head_dim !== null && json.head_dim !== headDim) {
    throw new Error(`${path}: head_dim ${JSON.stringify(json.head_dim)} differs from hidden_size / num_attention_heads = ${headDim}; not supported`);
  }
  if (headDim % 2 !== 0) throw new Error(`${path}: head size ${headDim} is odd; RoPE needs an even head size`);
  const scaling = json.rope_scaling;
  if (scaling !== undefined && scaling !== null) {
    throw new Error(`${path}: rope_scaling ${JSON.stringify(scaling)} is not supported (plain RoPE only)`);
  }
  const act = json.hidden_act;
  if (act !== undefined && act !== "silu") throw new Error(`${path}: hidden_act '${String(act)}' is not supported (llama and qwen2 use silu)`);
  return {
    arch: ckpt.modelType,
    hidden,
    ff: int("intermediate_size"),
    layers: int("num_hidden_layers"),
    heads,
    kvHeads,
    headDim,
    vocab: int("vocab_size"),
    context: int("max_position_embeddings"),
    rmsEps: pos("rms_norm_eps", 1e-6),
    ropeTheta: pos("rope_theta", 10000),
    tied: json.tie_word_embeddings === true,
  };
}

/** The GGUF tensors of a checkpoint, in llama.cpp's order, every HF tensor checked for name and shape. */
function ggufTensors(ckpt: HfCheckpoint, s: HfModelShape): Tensor[] {
  const q = s.heads * s.headDim;
  const kv = s.kvHeads * s.headDim;
  const qwen = s.arch === "qwen2";
  const want: { hf: string; shape: number[]; optional?: boolean }[] = [{ hf: "model.embed_tokens.weight", shape: [s.vocab, s.hidden] }];
  for (let l = 0; l < s.layers; l++) {
    const p = `model.layers.${l}.`;
    want.push(
      { hf: `${p}input_layernorm.weight`, shape: [s.hidden] },
      { hf: `${p}self_attn.q_proj.weight`, shape: [q, s.hidden] },
      { hf: `${p}self_attn.q_proj.bias`, shape: [q], optional: !qwen },
      { hf: `${p}self_attn.k_proj.weight`, shape: [kv, s.hidden] },
      { hf: `${p}self_attn.k_proj.bias`, shape: [kv], optional: !qwen },
      { hf: `${p}self_attn.v_proj.weight`, shape: [kv, s.hidden] },
      { hf: `${p}self_attn.v_proj.bias`, shape: [kv], optional: !qwen },
      { hf: `${p}self_attn.o_proj.weight`, shape: [s.hidden, q] },
      { hf: `${p}post_attention_layernorm.weight`, shape: [s.hidden] },
      { hf: `${p}mlp.gate_proj.weight`, shape: [s.ff, s.hidden] },
      { hf: `${p}mlp.up_proj.weight`, shape: [s.ff, s.hidden] },
      { hf: `${p}mlp.down_proj.weight`, shape: [s.hidden, s.ff] },
    );
  }
  want.push({ hf: "model.norm.weight", shape: [s.hidden] }, { hf: "lm_head.weight", shape: [s.vocab, s.hidden], optional: s.tied });

  const left = new Map(ckpt.weights);
  const out: Tensor[] = [];
  for (const { hf, shape, optional } of want) {
    const w = left.get(hf);
    if (!w) {
      if (optional) continue;
      throw new Error(`${ckpt.dir}: tensor ${hf} is missing from the safetensors weights${hf === "lm_head.weight" ? " (and config.json does not set tie_word_embeddings)" : ""}`);
    }
    left.delete(hf);
    const t = w.tensor;
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new Error(`${w.file}: tensor ${hf} has shape [${t.shape}], config.json needs [${shape}]`);
    }
    let data = t;
    if (!qwen && /self_attn\.q_proj\./.test(hf)) data = permuteRopeRows(t, s.heads);
    else if (!qwen && /self_attn\.k_proj\./.test(hf)) data = permuteRopeRows(t, s.kvHeads);
    out.push({ name: ggufTensorName(hf) as string, shape: [...shape], data: data.data });
  }
  for (const [name, w] of left) {
    // Older checkpoints store RoPE's inverse frequencies; llama.cpp recomputes them (as convert_hf_to_gguf.py skips them).
    if (/\.rotary_emb\.inv_freq$/.test(name)) continue;
    throw new Error(`${w.file}: tensor ${name} is not part of a ${s.arch} model with this config.json`);
  }
  return out;
}
