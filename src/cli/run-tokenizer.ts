// The tokenizer that decodes a stored run's token ids for `arbor inspect`. The store keeps each run's resolved
// config (JSON): its model is `model.path` (a GGUF, whose tokenizer metadata gives llama.cpp's ids) or a model
// created from `model.vocab` (Arbor's vocabulary, or a made-here BPE/SPM one, rebuilt here from its spec). A run
// served by external backends only (vLLM, SGLang…) records no tokenizer: `--model <gguf>` names one.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { ArborError } from "../core/errors.js";
import { readGgufMetadata } from "../model/gguf.js";
import { madeTokenizerSpec, type MadeModelKind } from "../model/made/made-models.js";
import { tokenizerFromGguf, tokenizerFromSpec } from "../model/made/tokenizer-from-spec.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import { Vocab } from "../model/vocab.js";

/** A tokenizer and where it came from, or why there is none. */
export type RunTokenizer = { tokenizer: ModelTokenizer; source: string } | { tokenizer?: undefined; reason: string };

function fromGguf(path: string, what: string): RunTokenizer {
  const p = resolve(path);
  if (!existsSync(p)) return { reason: `${what} ${p} does not exist${what === "--model" ? "" : " (pass --model <gguf>)"}` };
  try {
    return { tokenizer: tokenizerFromGguf(readGgufMetadata(p).metadata), source: `${what} ${p}` };
  } catch (e) {
    return { reason: `${what} ${p}: no tokenizer could be read (${(e as Error).message})` };
  }
}

/**
 * The tokenizer of a run from its stored config JSON, or of the GGUF `model` when given (it wins). Relative
 * `model.path`s resolve against the working directory, as `arbor run` resolved them. A `model` that gives no
 * tokenizer is the user's to fix: ArborError "config" naming --model (the run's own may be missing: ids are shown).
 */
export function runTokenizer(configJson: string, model?: string): RunTokenizer {
  if (model !== undefined) {
    const given = fromGguf(model, "--model");
    if (given.tokenizer === undefined) throw new ArborError(given.reason, "config");
    return given;
  }
  let cfg: { model?: { path?: unknown; vocab?: unknown }; engines?: unknown[]; backends?: unknown[] };
  try {
    cfg = JSON.parse(configJson) as typeof cfg;
  } catch {
    return { reason: "the run's stored config is not JSON (pass --model <gguf>)" };
  }
  if (typeof cfg.model?.path === "string") return fromGguf(cfg.model.path, "the run's model.path");
  if ((cfg.engines?.length ?? 0) === 0 && (cfg.backends?.length ?? 0) > 0) {
    return { reason: "the run served external backends only, whose tokenizer the store does not record (pass --model <gguf>)" };
  }
  const vocab = cfg.model?.vocab;
  if (vocab === "arbor") return { tokenizer: new Vocab(), source: "Arbor's vocabulary (the run's model.vocab)" };
  if (vocab === "bpe-chatml" || vocab === "spm-llama3") {
    return { tokenizer: tokenizerFromSpec(madeTokenizerSpec(vocab as MadeModelKind)), source: `the made-here ${vocab} vocabulary (the run's model.vocab)` };
  }
  return { reason: "the run's stored config names no model (pass --model <gguf>)" };
}

/** Decoded text of `ids` with special tokens shown, or undefined when an id is outside the vocabulary. */
export function decodeIds(tok: ModelTokenizer, ids: readonly number[]): string | undefined {
  if (ids.some((id) => !Number.isInteger(id) || id < 0 || id >= tok.size)) return undefined;
  return tok.decode(ids, { special: true });
}
