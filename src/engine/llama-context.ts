// How every Arbor component opens the policy on llama.cpp and asks it for next-token
// distributions: one place for the settings that make logprobs exact and decoding fast here.
import * as nodeLlamaCpp from "node-llama-cpp";
import { readGgufFileInfo, TokenBias, type ControlledEvaluateInputItem, type LlamaContext, type LlamaContextSequence, type LlamaModel, type Token } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";
import { guardOutputReorder } from "./llama-output-guard.js";
import { llamaRuntime, type LlamaGpu } from "./llama-runtime.js";

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
  /** llama.cpp build (default false: CPU); "auto" offloads every layer to a GPU build where one is installed. */
  gpu?: LlamaGpu;
}

/**
 * Load the GGUF and create one context of `sequences` sequences with `threads: 1` (on this kind of
 * machine more threads are slower). Throws ArborError naming the file when it cannot be loaded.
 */
export async function openLlamaContext(opts: LlamaContextOptions): Promise<{ model: LlamaModel; context: LlamaContext }> {
  if (!Number.isInteger(opts.sequences) || opts.sequences < 1) throw new ArborError(`sequences must be >= 1, got ${opts.sequences}`, "config");
  if (!Number.isInteger(opts.contextSize) || opts.contextSize < 2) throw new ArborError(`contextSize must be >= 2, got ${opts.contextSize}`, "config");
  const model = await loadLlamaModel(opts.modelPath, opts.gpu ?? false, false);
  // llama.cpp would run past the trained context silently (RoPE beyond it): refuse, as vLLM does for max_model_len.
  const trained = model.trainContextSize;
  if (trained > 0 && trained < opts.contextSize) {
    await model.dispose();
    throw new ArborError(
      `model ${opts.modelPath}: its context length is ${trained} tokens (GGUF ${model.fileInfo.metadata.general.architecture}.context_length), smaller than the contextSize ${opts.contextSize} the engine asks for`,
      "model",
    );
  }
  const exact = opts.exactKv ?? true;
  try {
    const context = await model.createContext({
      contextSize: opts.contextSize,
      sequences: opts.sequences,
      threads: 1,
      ...(exact ? { flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" } : {}),
    });
    try {
      // Sequences of one batch are sampled in parallel threads: without this, one can get another's distribution.
      guardOutputReorder(context);
    } catch (err) {
      await context.dispose();
      throw err;
    }
    return { model, context };
  } catch (err) {
    await model.dispose();
    throw err;
  }
}

/**
 * Load a GGUF on llama.cpp (`vocabOnly`: its tokenizer only). A file llama.cpp cannot load is an
 * ArborError naming the file and the reason; an architecture llama.cpp does not know is named as such.
 */
export async function loadLlamaModel(modelPath: string, gpu: LlamaGpu, vocabOnly: boolean): Promise<LlamaModel> {
  const llama = await llamaRuntime(gpu);
  try {
    return await llama.loadModel({ modelPath, vocabOnly, ...(gpu === false || vocabOnly ? {} : { gpuLayers: "auto" as const }) });
  } catch (err) {
    const arch = await architectureOf(modelPath);
    if (arch !== undefined && !KNOWN_ARCHITECTURES.has(arch)) {
      throw new ArborError(`cannot load model ${modelPath}: architecture "${arch}" (general.architecture) is not one llama.cpp can run (e.g. llama, qwen2, qwen3, mistral3, gemma3, phi3)`, "model");
    }
    throw new ArborError(`cannot load model ${modelPath}: ${oneLine((err as Error).message)}`, "model");
  }
}

// node-llama-cpp's list of llama.cpp's architectures (a const enum in its types, an object at run time).
const KNOWN_ARCHITECTURES: ReadonlySet<string> = new Set(Object.values((nodeLlamaCpp as unknown as Record<string, Record<string, string>>)["GgufArchitectureType"] ?? {}));

/** `general.architecture` of a GGUF, or undefined when the file cannot be read as one. */
async function architectureOf(modelPath: string): Promise<string | undefined> {
  try {
    const info = await readGgufFileInfo(modelPath, { sourceType: "filesystem", readTensorInfo: false, logWarnings: false, ignoreKeys: ["tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"] });
    const arch = (info.metadata as { general?: { architecture?: unknown } }).general?.architecture;
    return typeof arch === "string" ? arch : undefined;
  } catch {
    return undefined;
  }
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, "; ");
}

/**
 * Controls applied by llama.cpp to the raw logits before its softmax, in vLLM's order: the logit
 * bias, then the repetition penalty over every token of `history` (prompt and output so far):
 * llama.cpp's penalties sampler divides a positive logit by the penalty and multiplies any other,
 * as vLLM's apply_penalties does (frequency and presence penalties stay 0).
 */
export interface RawLogitControls {
  repetitionPenalty: number;
  logitBias?: ReadonlyMap<number, number>;
  history: readonly number[];
}

/**
 * Feed `tokens` to `seq`; when `sample`, return the temperature-0 next-token distribution after the
 * last one (Arbor samples from it itself, with the request's own Rng and temperature), under
 * `controls` when given.
 */
export async function evaluateTokens(
  seq: LlamaContextSequence,
  tokens: readonly number[],
  sample: boolean,
  controls?: RawLogitControls,
): Promise<Map<number, number> | undefined> {
  if (sample) return (await evaluateDistributions(seq, tokens, 1, () => controls))[0];
  // node-llama-cpp brands token ids; callers range-check ours against the vocabulary.
  await seq.controlledEvaluate(tokens.map((id) => id as Token));
  return undefined;
}

/** node-llama-cpp's sampling options for {@link RawLogitControls} (greedy: the chain only reshapes logits). */
function rawControlOptions(seq: LlamaContextSequence, c: RawLogitControls) {
  // Each token once: the penalty depends on presence, not counts, and the window must hold them all.
  const punish = [...new Set(c.history)] as Token[];
  let tokenBias: TokenBias | undefined;
  if (c.logitBias && c.logitBias.size > 0) {
    tokenBias = TokenBias.for(seq.model);
    // TokenBias.set skips end-of-generation tokens and maps numbers through a probability curve;
    // vLLM's logit_bias adds to any token's logit, so the raw table (what node-llama-cpp hands to
    // llama_sampler_init_logit_bias) is filled directly.
    const table = (tokenBias as unknown as { _biases: Map<number, number> })._biases;
    if (!(table instanceof Map)) throw new ArborError("node-llama-cpp's TokenBias has no bias table: logit_bias with repetition_penalty cannot be applied", "engine");
    for (const [id, b] of c.logitBias) table.set(id, b);
  }
  return {
    temperature: 0,
    repeatPenalty: { punishTokens: punish, penalty: c.repetitionPenalty, frequencyPenalty: 0, presencePenalty: 0, maxPunishTokens: Math.max(1, punish.length) },
    ...(tokenBias ? { tokenBias } : {}),
  };
}

/**
 * Feed `tokens` to `seq` and return the temperature-0 next-token distribution after each of the
 * last `count` tokens, in order (speculative decoding: the distributions a draft is verified
 * against, from one evaluation). `controlsAt(i)` gives the controls of the i-th of them.
 */
export async function evaluateDistributions(
  seq: LlamaContextSequence,
  tokens: readonly number[],
  count: number,
  controlsAt: (i: number) => RawLogitControls | undefined,
): Promise<Map<number, number>[]> {
  const first = tokens.length - count;
  if (!Number.isInteger(count) || count < 1 || first < 0) throw new ArborError(`evaluateDistributions: count must be in 1..${tokens.length}, got ${count}`, "engine");
  const items = tokens.map((id, i): ControlledEvaluateInputItem => {
    if (i < first) return id as Token;
    const c = controlsAt(i - first);
    return [id as Token, { generateNext: { probabilities: true, options: c ? rawControlOptions(seq, c) : { temperature: 0 } } }];
  });
  const out = await seq.controlledEvaluate(items);
  const dists: Map<number, number>[] = [];
  for (let i = first; i < tokens.length; i++) {
    const probs = out[i]?.next.probabilities;
    if (!probs || probs.size === 0) throw new ArborError(`llama.cpp returned no next-token distribution at position ${i} of the evaluation`, "engine");
    dists.push(probs);
  }
  return dists;
}
