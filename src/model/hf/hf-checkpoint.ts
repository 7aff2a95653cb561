// Reading a Hugging Face checkpoint directory: config.json, the weights (model.safetensors, or the
// shards model.safetensors.index.json lists) as float32 tensors from F32, F16 or BF16, and the
// tokenizer files. Every error is one line naming the file and the reason.

import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { readSafetensors } from "../safetensors.js";
import type { Tensor } from "../weights.js";
import type { HfTokenizerSources } from "./hf-tokenizer-import.js";

/** The model types `arbor hf convert` handles. */
export const HF_MODEL_TYPES = ["llama", "qwen2"] as const;
export type HfModelType = (typeof HF_MODEL_TYPES)[number];

/** One weight tensor of a checkpoint: widened to float32, with its stored dtype and file. */
export interface HfWeight {
  tensor: Tensor;
  dtype: string;
  file: string;
}

/** A checkpoint directory's parsed files. */
export interface HfCheckpoint {
  dir: string;
  modelType: HfModelType;
  config: { path: string; json: Record<string, unknown> };
  weights: Map<string, HfWeight>;
  tokenizer: HfTokenizerSources;
}

/** Read the checkpoint in `dir`: config first (so a wrong model type fails before the weights load). */
export function readHfCheckpoint(dir: string): HfCheckpoint {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir}: not a directory (a Hugging Face checkpoint is a directory with config.json)`);
  const config = readJson(join(dir, "config.json"), "a Hugging Face checkpoint needs config.json");
  const modelType = config.json.model_type;
  if (typeof modelType !== "string" || !(HF_MODEL_TYPES as readonly string[]).includes(modelType)) {
    throw new Error(`${config.path}: model_type '${String(modelType)}' is not supported (supported: ${HF_MODEL_TYPES.join(", ")})`);
  }
  const quant = config.json.quantization_config as { quant_method?: unknown } | undefined;
  if (quant && typeof quant === "object") {
    throw new Error(`${config.path}: a quantized checkpoint (quantization_config.quant_method '${String(quant.quant_method)}'); only F32, F16 and BF16 weights are supported`);
  }
  const tokenizerJson = readJson(join(dir, "tokenizer.json"), "the tokenizer is read from tokenizer.json");
  const tcPath = join(dir, "tokenizer_config.json");
  const genPath = join(dir, "generation_config.json");
  const templatePath = join(dir, "chat_template.jinja");
  const tokenizer: HfTokenizerSources = {
    tokenizerJson,
    config,
    ...(existsSync(tcPath) ? { tokenizerConfig: readJson(tcPath, "") } : {}),
    ...(existsSync(genPath) ? { generationConfig: readJson(genPath, "") } : {}),
    ...(existsSync(templatePath) ? { chatTemplateFile: readFileSync(templatePath, "utf8") } : {}),
  };
  return { dir, modelType: modelType as HfModelType, config, weights: readWeights(dir), tokenizer };
}

function readWeights(dir: string): Map<string, HfWeight> {
  const single = join(dir, "model.safetensors");
  const indexPath = join(dir, "model.safetensors.index.json");
  let files: string[];
  let expected: Map<string, string> | undefined;
  if (existsSync(indexPath)) {
    const index = readJson(indexPath, "");
    const map = index.json.weight_map;
    if (typeof map !== "object" || map === null || Array.isArray(map) || Object.values(map).some((f) => typeof f !== "string")) {
      throw new Error(`${indexPath}: weight_map must map tensor names to file names`);
    }
    expected = new Map(Object.entries(map as Record<string, string>));
    files = [...new Set(expected.values())].sort();
  } else if (existsSync(single)) {
    files = ["model.safetensors"];
  } else {
    throw new Error(`${dir}: no model.safetensors or model.safetensors.index.json (only safetensors weights are supported)`);
  }
  const weights = new Map<string, HfWeight>();
  for (const f of files) {
    const path = join(dir, f);
    if (!existsSync(path)) throw new Error(`${path}: missing (listed in model.safetensors.index.json)`);
    const { tensors, dtypes } = readSafetensors(path);
    for (const t of tensors) {
      const dtype = dtypes.get(t.name) as string;
      if (!(t.data instanceof Float32Array)) {
        throw new Error(`${path}: tensor ${t.name} has dtype ${dtype}; only F32, F16 and BF16 weights are supported`);
      }
      if (weights.has(t.name)) throw new Error(`${path}: tensor ${t.name} is also in ${weights.get(t.name)?.file}`);
      if (expected && expected.get(t.name) !== f) {
        throw new Error(`${path}: tensor ${t.name} is not listed for this file in model.safetensors.index.json`);
      }
      weights.set(t.name, { tensor: t as Tensor, dtype, file: path });
    }
  }
  if (expected) {
    for (const [name, f] of expected) if (!weights.has(name)) throw new Error(`${join(dir, f)}: tensor ${name} (listed in model.safetensors.index.json) is missing`);
  }
  return weights;
}

function readJson(path: string, why: string): { path: string; json: Record<string, unknown> } {
  if (!existsSync(path)) throw new Error(`${path}: missing${why ? ` (${why})` : ""}`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`${path}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new Error(`${path}: must be a JSON object`);
  return { path, json: json as Record<string, unknown> };
}
