// A published policy checkpoint in the format each engine loads: one GGUF file (Arbor's engine, llama-server)
// or a Hugging Face directory (vLLM, SGLang, the PyTorch trainer). A trainer publishes one format; the run's
// weight sync asks here for the others, and each is converted once, next to the original: `policy-v3.gguf` →
// `policy-v3.gguf.hf/`, `policy-v3/` → `policy-v3.gguf` (the name says what it came from, and a conversion
// never lands on the file it was made from).
import { existsSync, statSync } from "node:fs";
import { ArborError } from "../../core/errors.js";
import { convertHfToGguf } from "./hf-convert.js";
import { exportHfCheckpoint } from "./hf-export.js";

/** The two checkpoint formats: a GGUF file, or an HF directory (config.json and safetensors). */
export type CheckpointFormat = "gguf" | "hf";

/** The format of the checkpoint at `path`; throws naming the path when it is neither. */
export function checkpointFormat(path: string): CheckpointFormat {
  if (!existsSync(path)) throw new ArborError(`checkpoint ${path}: no such file or directory`, "weight_sync");
  if (statSync(path).isDirectory()) {
    if (!existsSync(`${path}/config.json`)) throw new ArborError(`checkpoint ${path}: a directory without config.json is not a Hugging Face checkpoint`, "weight_sync");
    return "hf";
  }
  return "gguf";
}

/** Where the checkpoint at `path` lives in `format`: itself, or its converted sibling. */
export function convertedPath(path: string, format: CheckpointFormat): string {
  const base = path.replace(/\/+$/, "");
  if (checkpointFormat(base) === format) return base;
  return `${base}.${format}`;
}

/**
 * The checkpoint at `path` in `format`, converting it (once: an existing conversion newer than its source is
 * reused). Conversion errors name the checkpoint and the reason.
 */
export function checkpointAs(path: string, format: CheckpointFormat): string {
  const base = path.replace(/\/+$/, "");
  const target = convertedPath(base, format);
  if (target === base) return base;
  const marker = format === "hf" ? `${target}/config.json` : target;
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(base).mtimeMs) return target;
  try {
    if (format === "hf") exportHfCheckpoint(base, target);
    else convertHfToGguf(base, target);
  } catch (e) {
    throw new ArborError(`checkpoint ${base}: cannot convert it to ${format === "hf" ? "a Hugging Face directory" : "GGUF"}: ${(e as Error).message}`, "weight_sync");
  }
  return target;
}
