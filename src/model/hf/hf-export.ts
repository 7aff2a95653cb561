// `arbor hf export`: a llama-architecture GGUF (the tiny policy, or any F32/F16/BF16 llama GGUF) as a
// Hugging Face LlamaForCausalLM checkpoint directory that transformers loads: config.json,
// model.safetensors (F32, HF tensor names, q/k rows in HF's RoPE order), tokenizer.json,
// tokenizer_config.json (with the chat template) and generation_config.json.

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../atomic-file.js";
import { configFromGguf, readGguf } from "../gguf.js";
import { writeSafetensors } from "../safetensors.js";
import { expectedShapes, type Tensor } from "../weights.js";
import { tokenizerSpecFromGguf } from "../gguf-tokenizer.js";
import { hfTensorName, unpermuteRopeRows } from "./hf-tensors.js";
import { hfTokenizerFiles } from "./hf-tokenizer-export.js";

/** The files an export writes, in write order. */
export const HF_EXPORT_FILES = ["model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "config.json"] as const;

/** What {@link exportHfCheckpoint} wrote. */
export interface HfExportResult {
  dir: string;
  files: string[];
  tensors: number;
  tiedEmbeddings: boolean;
}

/**
 * Export the llama GGUF at `ggufPath` into `outDir` (created if missing; existing files of the same
 * names are replaced, each atomically). Throws one-line errors naming the GGUF and the reason for
 * another architecture, a quantized tensor, a missing or misshapen tensor, or an unsupported tokenizer.
 */
export function exportHfCheckpoint(ggufPath: string, outDir: string): HfExportResult {
  const gguf = readGguf(ggufPath);
  const cfg = configFromGguf(gguf.metadata, ggufPath);
  const tok = tokenizerSpecFromGguf(gguf.metadata, ggufPath);
  if (tok.tokens.length !== cfg.nVocab) {
    throw new Error(`${ggufPath}: llama.vocab_size ${cfg.nVocab} != ${tok.tokens.length} tokens in tokenizer.ggml.tokens`);
  }
  const byName = new Map(gguf.tensors.map((t) => [t.name, t]));
  const tied = !byName.has("output.weight");
  const out: Tensor[] = [];
  for (const { name, shape } of expectedShapes(cfg)) {
    const t = byName.get(name);
    if (!t) {
      if (name === "output.weight") continue; // llama.cpp ties the output to token_embd when absent
      throw new Error(`${ggufPath}: tensor ${name} is missing`);
    }
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new Error(`${ggufPath}: tensor ${name} has shape [${t.shape}], the model's config needs [${shape}]`);
    }
    byName.delete(name);
    let w = t;
    if (/\.attn_q\.weight$/.test(name)) w = unpermuteRopeRows(t, cfg.nHead);
    else if (/\.attn_k\.weight$/.test(name)) w = unpermuteRopeRows(t, cfg.nHeadKv);
    out.push({ name: hfTensorName(name) as string, shape: w.shape, data: w.data });
  }
  const extra = [...byName.keys()];
  if (extra.length > 0) throw new Error(`${ggufPath}: tensor ${extra[0]} has no Hugging Face llama counterpart (${extra.length} such tensors)`);

  const files = hfTokenizerFiles(tok, { source: ggufPath, contextLength: cfg.contextLength });
  const name = gguf.metadata.get("general.name");
  const config: Record<string, unknown> = {
    ...(typeof name === "string" ? { _name_or_path: name } : {}),
    architectures: ["LlamaForCausalLM"],
    model_type: "llama",
    hidden_size: cfg.nEmbd,
    intermediate_size: cfg.nFf,
    num_hidden_layers: cfg.nLayer,
    num_attention_heads: cfg.nHead,
    num_key_value_heads: cfg.nHeadKv,
    head_dim: cfg.nEmbd / cfg.nHead,
    hidden_act: "silu",
    rms_norm_eps: shortestF32(cfg.rmsEps),
    rope_theta: shortestF32(cfg.ropeFreqBase),
    rope_scaling: null,
    max_position_embeddings: cfg.contextLength,
    vocab_size: cfg.nVocab,
    bos_token_id: tok.bosId ?? null,
    eos_token_id: tok.eosId ?? null,
    ...(tok.padId !== undefined ? { pad_token_id: tok.padId } : {}),
    tie_word_embeddings: tied,
    attention_bias: false,
    mlp_bias: false,
    attention_dropout: 0,
    initializer_range: 0.02,
    pretraining_tp: 1,
    use_cache: true,
    torch_dtype: "float32",
  };
  const generation: Record<string, unknown> = {
    bos_token_id: tok.bosId ?? null,
    eos_token_id: files.eosIds.length === 1 ? files.eosIds[0] : files.eosIds,
    ...(tok.padId !== undefined ? { pad_token_id: tok.padId } : {}),
  };

  mkdirSync(outDir, { recursive: true });
  writeSafetensors(join(outDir, "model.safetensors"), out, { format: "pt" });
  writeJson(join(outDir, "tokenizer.json"), files.tokenizerJson);
  writeJson(join(outDir, "tokenizer_config.json"), files.tokenizerConfig);
  writeJson(join(outDir, "generation_config.json"), generation);
  // config.json last: a directory with it is a complete checkpoint.
  writeJson(join(outDir, "config.json"), config);
  return { dir: outDir, files: [...HF_EXPORT_FILES], tensors: out.length, tiedEmbeddings: tied };
}

/** The shortest decimal that reads back as the same float32 (GGUF stores these as f32): 1e-5, not 9.99999974e-6. */
function shortestF32(x: number): number {
  for (let p = 1; p <= 9; p++) {
    const v = Number(x.toPrecision(p));
    if (Math.fround(v) === Math.fround(x)) return v;
  }
  return x;
}

function writeJson(path: string, value: unknown): void {
  writeFileAtomic(path, (put) => put(Buffer.from(`${JSON.stringify(value, null, 2)}\n`, "utf8")));
}
