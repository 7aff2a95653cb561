// Test fixtures for the Hugging Face export/conversion: a small byte-level BPE vocabulary (GPT-2's
// byte-to-unicode alphabet, a few merges, ChatML specials), written as a llama GGUF; and a small qwen2
// Hugging Face checkpoint (config.json, BF16 or F16 safetensors with q/k/v biases, tokenizer.json with
// Qwen2's pre-tokenizer, tokenizer_config.json with a ChatML template), all made here.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../core/rng.js";
import { tinyConfig, type TinyLlamaConfig } from "../model/config.js";
import { writeGguf } from "../model/gguf.js";
import type { GgufTokenizerSpec } from "../model/gguf-tokenizer.js";
import { BYTE_CHARS } from "../model/made/byte-level.js";
import { initWeights, numel, type Tensor } from "../model/weights.js";
import { f32ToBf16, f32ToF16 } from "./half-floats.js";

/** GPT-2's bytes_to_unicode: the printable character standing for each byte. */
export function byteLevelAlphabet(): string[] {
  return [...BYTE_CHARS];
}

/** Merges of the test vocabulary, highest priority first. */
export const BPE_MERGES = ["Ġ t", "h e", "i n", "Ġt he", "e r", "a n", "Ġ a", "o n", "Ġ c", "a l", "c al", "Ġ s", "Ġ 1", "Ġ 2", "Ġ +"];
export const BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/** A ChatML template (Qwen-like, without tools). */
export const CHATML_TEMPLATE =
  "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/** The test vocabulary: 256 byte characters in byte order, the merged pieces, then the specials. */
export function byteLevelVocab(): { tokens: string[]; types: number[] } {
  const tokens = [...byteLevelAlphabet(), ...BPE_MERGES.map((m) => m.replace(" ", "")), ...BPE_SPECIALS];
  const types = tokens.map((_, i) => (i >= tokens.length - BPE_SPECIALS.length ? 3 : 1));
  return { tokens, types };
}

/** Write a llama GGUF with the byte-level vocabulary (pre-tokenizer `pre`) and seeded weights. */
export function writeByteLevelGguf(path: string, opts: { seed?: number; pre?: string; nEmbd?: number } = {}): { config: TinyLlamaConfig; tokens: string[] } {
  const { tokens, types } = byteLevelVocab();
  const cfg = tinyConfig({ nVocab: tokens.length, nEmbd: opts.nEmbd ?? 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 256 });
  const tokenizer: GgufTokenizerSpec = {
    model: "gpt2",
    pre: opts.pre ?? "qwen2",
    tokens,
    types,
    merges: BPE_MERGES,
    bosId: tokens.indexOf("<|endoftext|>"),
    eosId: tokens.indexOf("<|im_end|>"),
    padId: tokens.indexOf("<|endoftext|>"),
    addBos: false,
    chatTemplate: CHATML_TEMPLATE,
  };
  const rng = new Rng((opts.seed ?? 1) + 100);
  const tensors = initWeights(cfg, new Rng(opts.seed ?? 1)).map((t) => ({ ...t, data: t.data.map((x) => (t.name.includes("norm") ? 1 + 0.2 * rng.normal() : x * 20)) }));
  writeGguf(path, { config: cfg, tokenizer, tensors, metadata: { "general.name": "bpe-test" } });
  return { config: cfg, tokens };
}

/** Shape of the made-here qwen2 checkpoint. */
export const QWEN2_TEST = { hidden: 32, ff: 48, layers: 2, heads: 4, kvHeads: 2, context: 128 } as const;

/**
 * Write a small qwen2 checkpoint into `dir` (weights in `dtype`, tied embeddings as Qwen2.5-0.5B).
 * Returns the float32 weights the half-precision file stores exactly (each value already rounded).
 */
export function writeQwen2Checkpoint(dir: string, opts: { dtype: "BF16" | "F16" | "F32"; seed?: number; shards?: number; config?: Record<string, unknown> }): Map<string, Tensor> {
  mkdirSync(dir, { recursive: true });
  const { tokens } = byteLevelVocab();
  const vocabSize = tokens.length + 3; // padded embedding rows, as Qwen's 151936 > its tokenizer's size
  const s = QWEN2_TEST;
  const hd = s.hidden / s.heads;
  const shapes: [string, number[]][] = [["model.embed_tokens.weight", [vocabSize, s.hidden]]];
  for (let l = 0; l < s.layers; l++) {
    const p = `model.layers.${l}.`;
    shapes.push(
      [`${p}input_layernorm.weight`, [s.hidden]],
      [`${p}self_attn.q_proj.weight`, [s.heads * hd, s.hidden]],
      [`${p}self_attn.q_proj.bias`, [s.heads * hd]],
      [`${p}self_attn.k_proj.weight`, [s.kvHeads * hd, s.hidden]],
      [`${p}self_attn.k_proj.bias`, [s.kvHeads * hd]],
      [`${p}self_attn.v_proj.weight`, [s.kvHeads * hd, s.hidden]],
      [`${p}self_attn.v_proj.bias`, [s.kvHeads * hd]],
      [`${p}self_attn.o_proj.weight`, [s.hidden, s.heads * hd]],
      [`${p}post_attention_layernorm.weight`, [s.hidden]],
      [`${p}mlp.gate_proj.weight`, [s.ff, s.hidden]],
      [`${p}mlp.up_proj.weight`, [s.ff, s.hidden]],
      [`${p}mlp.down_proj.weight`, [s.hidden, s.ff]],
    );
  }
  shapes.push(["model.norm.weight", [s.hidden]]);
  const rng = new Rng(opts.seed ?? 5);
  const weights = new Map<string, Tensor>();
  const words = new Map<string, Uint16Array | Float32Array>();
  for (const [name, shape] of shapes) {
    const r = rng.fork(name);
    const raw = Float32Array.from({ length: numel(shape) }, () => (name.endsWith("norm.weight") ? 1 + 0.2 * r.normal() : 0.4 * r.normal()));
    const stored = opts.dtype === "BF16" ? f32ToBf16(raw) : opts.dtype === "F16" ? f32ToF16(raw) : raw;
    words.set(name, stored);
    const back = opts.dtype === "F32" ? raw : opts.dtype === "BF16" ? new Float32Array(Uint32Array.from(stored as Uint16Array, (w) => w << 16).buffer) : null;
    weights.set(name, { name, shape, data: back ?? halfToF32(stored as Uint16Array) });
  }
  const nShards = opts.shards ?? 1;
  const names = shapes.map(([n]) => n);
  const weightMap: Record<string, string> = {};
  for (let k = 0; k < nShards; k++) {
    const file = nShards === 1 ? "model.safetensors" : `model-${String(k + 1).padStart(5, "0")}-of-${String(nShards).padStart(5, "0")}.safetensors`;
    const mine = names.filter((_, i) => i % nShards === k);
    for (const n of mine) weightMap[n] = file;
    writeRawSafetensors(join(dir, file), mine.map((n) => ({ name: n, shape: weights.get(n)!.shape, dtype: opts.dtype, data: words.get(n)! })));
  }
  if (nShards > 1) writeFileSync(join(dir, "model.safetensors.index.json"), JSON.stringify({ metadata: { total_size: 0 }, weight_map: weightMap }));

  writeFileSync(
    join(dir, "config.json"),
    JSON.stringify({
      architectures: ["Qwen2ForCausalLM"],
      model_type: "qwen2",
      hidden_size: s.hidden,
      intermediate_size: s.ff,
      num_hidden_layers: s.layers,
      num_attention_heads: s.heads,
      num_key_value_heads: s.kvHeads,
      max_position_embeddings: s.context,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      vocab_size: vocabSize,
      hidden_act: "silu",
      tie_word_embeddings: true,
      bos_token_id: tokens.indexOf("<|endoftext|>"),
      eos_token_id: tokens.indexOf("<|im_end|>"),
      torch_dtype: opts.dtype === "BF16" ? "bfloat16" : opts.dtype === "F16" ? "float16" : "float32",
      ...opts.config,
    }),
  );
  const vocab: Record<string, number> = {};
  tokens.slice(0, tokens.length - BPE_SPECIALS.length).forEach((t, i) => (vocab[t] = i));
  const added = BPE_SPECIALS.map((content) => ({ id: tokens.indexOf(content), content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };
  writeFileSync(
    join(dir, "tokenizer.json"),
    JSON.stringify({
      version: "1.0",
      added_tokens: added,
      normalizer: { type: "NFC" },
      pre_tokenizer: {
        type: "Sequence",
        pretokenizers: [
          {
            type: "Split",
            pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
            behavior: "Isolated",
            invert: false,
          },
          byteLevel,
        ],
      },
      post_processor: byteLevel,
      decoder: byteLevel,
      // tokenizers >= 0.20 writes merges as pairs.
      model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: BPE_MERGES.map((m) => m.split(" ")) },
    }),
  );
  writeFileSync(
    join(dir, "tokenizer_config.json"),
    JSON.stringify({ add_prefix_space: false, bos_token: null, eos_token: "<|im_end|>", pad_token: "<|endoftext|>", chat_template: CHATML_TEMPLATE, model_max_length: 131072 }),
  );
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ bos_token_id: tokens.indexOf("<|endoftext|>"), eos_token_id: [tokens.indexOf("<|im_end|>"), tokens.indexOf("<|endoftext|>")] }));
  return weights;
}

/** A safetensors file of F32/F16/BF16 tensors from their stored words (header padded to 8 bytes). */
export function writeRawSafetensors(path: string, tensors: { name: string; shape: number[]; dtype: string; data: Uint16Array | Float32Array | Int32Array }[]): void {
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let off = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.data.byteLength] };
    off += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  writeFileSync(path, Buffer.concat([len, Buffer.from(json), ...tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))]));
}

function halfToF32(words: Uint16Array): Float32Array {
  const out = new Float32Array(words.length);
  for (let i = 0; i < words.length; i++) {
    const h = words[i] as number;
    const e = (h >> 10) & 0x1f;
    const m = h & 0x3ff;
    const v = e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15);
    out[i] = h & 0x8000 ? -v : v;
  }
  return out;
}

/** Merged pieces of the SentencePiece-style test vocabulary, best score first. */
export const SPM_MERGED = ["\u2581t", "he", "\u2581the", "in", "er", "\u2581a", "an", "\u2581c", "at", "\u2581cat", "on"];

/**
 * A SentencePiece-style vocabulary (Llama-2 layout: `<unk>`, `<s>`, `</s>`, 256 byte pieces, `▁`, the
 * letters, merged pieces with descending scores, chat control tokens) as a llama GGUF that adds a
 * space prefix, with seeded weights.
 */
export function writeSpmGguf(path: string, opts: { seed?: number } = {}): { tokens: string[]; scores: number[] } {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [2, 3, 3];
  const scores = [0, 0, 0];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(6);
    scores.push(0);
  }
  const singles = ["\u2581", ..."abcdefghijklmnopqrstuvwxyz", ..."TS.,!?"];
  singles.forEach((c, i) => {
    tokens.push(c);
    types.push(1);
    scores.push(-1000 - i);
  });
  SPM_MERGED.forEach((p, i) => {
    tokens.push(p);
    types.push(1);
    scores.push(-(i + 1));
  });
  for (const c of ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]) {
    tokens.push(c);
    types.push(3);
    scores.push(0);
  }
  const cfg = tinyConfig({ nVocab: tokens.length, nEmbd: 32, nLayer: 1, nHead: 4, nHeadKv: 4, nFf: 48, contextLength: 128 });
  const tokenizer: GgufTokenizerSpec = {
    model: "llama",
    tokens,
    types,
    scores,
    unkId: 0,
    bosId: 1,
    eosId: 2,
    eotId: tokens.indexOf("<|eot_id|>"),
    addSpacePrefix: true,
    addBos: true,
  };
  writeGguf(path, { config: cfg, tokenizer, tensors: initWeights(cfg, new Rng(opts.seed ?? 2)) });
  return { tokens, scores };
}
