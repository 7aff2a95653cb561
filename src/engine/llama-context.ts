// How every Arbor component opens the policy on llama.cpp and asks it for next-token
// distributions: one place for the settings that make logprobs exact and decoding fast here.
import type { ControlledEvaluateInputItem, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";
import { llamaRuntime } from "./llama-runtime.js";

export interface LlamaContextOptions {
  modelPath: string;
  sequences: number;
  /** Context length of each sequence, in tokens. */
  contextSize: number;
  /**
   * F32 KV cache without flash attention (default true): logprobs then agree with a plain forward
   * pass to ~1e-5, which trainer/engine agreement needs. False uses llama.cpp's F16 default.
   */
  exactKv?: boolean;
}

/**
 * Load the GGUF and create one context of `sequences` sequences with `threads: 1` (on this kind of
 * machine more threads are slower). Throws ArborError naming the file when it cannot be loaded.
 */
export async function openLlamaContext(opts: LlamaContextOptions): Promise<{ model: LlamaModel; context: LlamaContext }> {
  if (!Number.isInteger(opts.sequences) || opts.sequences < 1) throw new ArborError(`sequences must be >= 1, got ${opts.sequences}`, "config");
  if (!Number.isInteger(opts.contextSize) || opts.contextSize < 2) throw new ArborError(`contextSize must be >= 2, got ${opts.contextSize}`, "config");
  const llama = await llamaRuntime();
  let model: LlamaModel;
  try {
    model = await llama.loadModel({ modelPath: opts.modelPath });
  } catch (err) {
    throw new ArborError(`cannot load model ${opts.modelPath}: ${(err as Error).message}`, "model");
  }
  const exact = opts.exactKv ?? true;
  try {
    const context = await model.createContext({
      contextSize: opts.contextSize,
      sequences: opts.sequences,
      threads: 1,
      ...(exact ? { flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" } : {}),
    });
    return { model, context };
  } catch (err) {
    await model.dispose();
    throw err;
  }
}

/**
 * Feed `tokens` to `seq`; when `sample`, return the temperature-0 next-token distribution after the
 * last one (Arbor samples from it itself, with the request's own Rng and temperature).
 */
export async function evaluateTokens(seq: LlamaContextSequence, tokens: readonly number[], sample: boolean): Promise<Map<number, number> | undefined> {
  const last = tokens.length - 1;
  // node-llama-cpp brands token ids; callers range-check ours against the vocabulary.
  const items = tokens.map(
    (id, i): ControlledEvaluateInputItem =>
      sample && i === last ? [id as Token, { generateNext: { probabilities: true, options: { temperature: 0 } } }] : (id as Token),
  );
  const out = await seq.controlledEvaluate(items);
  if (!sample) return undefined;
  const probs = out[last]?.next.probabilities;
  if (!probs || probs.size === 0) throw new ArborError("llama.cpp returned no next-token distribution", "engine");
  return probs;
}
