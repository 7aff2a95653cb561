// Trainer/engine agreement: the same tokens scored by the trainer's tfjs forward pass and by llama.cpp
// running the GGUF the trainer wrote (F32 KV cache, no flash attention — docs/references.md §L), compared
// position by position. A policy-gradient ratio π_θ/π_old is only meaningful when both sides compute
// the same π for the same weights, so this is the check that the trainer's maths is the engine's.
import * as tf from "@tensorflow/tfjs";
import type { ControlledEvaluateInputItem, Token } from "node-llama-cpp";
import { ArborError } from "../core/errors.js";
import { openLlamaContext } from "../engine/llama-context.js";
import { causalMask } from "../trainer/attention-mask.js";
import type { TinyLlama } from "../trainer/tiny-llama.js";

/** Mismatch statistics over every scored position. */
export interface AgreementStats {
  sequences: number;
  /** Positions compared (each token after the first of each sequence). */
  positions: number;
  /** |log π_trainer(next) − log π_engine(next)| over the actual next tokens. */
  maxAbsLogprobDiff: number;
  meanAbsLogprobDiff: number;
  /** max over positions and the whole vocabulary of |π_trainer − π_engine|. */
  maxAbsProbDiff: number;
}

/** Per-position next-token distributions (row t: the distribution after tokens[0..t]) from the trainer. */
export function trainerDistributions(model: TinyLlama, tokens: readonly number[]): Float32Array {
  return tf.tidy(() => {
    const n = tokens.length;
    const hidden = model.hidden(tokens, Int32Array.from(tokens, (_, i) => i), { kind: "dense", mask: causalMask(n) });
    const rows = Int32Array.from(tokens, (_, i) => i);
    return tf.softmax(model.logits(hidden, rows), -1).dataSync() as Float32Array;
  }).slice();
}

/**
 * Score `sequences` with the trainer's `model` and with llama.cpp on `ggufPath` (which must hold the
 * same weights) and report the mismatch. Throws ArborError when the engine returns no distribution.
 */
export async function engineAgreement(model: TinyLlama, ggufPath: string, sequences: readonly (readonly number[])[]): Promise<AgreementStats> {
  const longest = Math.max(2, ...sequences.map((s) => s.length));
  const { model: llm, context } = await openLlamaContext({ modelPath: ggufPath, sequences: 1, contextSize: Math.max(64, longest), exactKv: true });
  const V = model.config.nVocab;
  let positions = 0;
  let sumAbs = 0;
  let maxAbs = 0;
  let maxProb = 0;
  try {
    const seq = context.getSequence();
    for (const tokens of sequences) {
      if (tokens.length < 2) continue;
      // One sequence, emptied between inputs: each is scored from an empty KV cache.
      await seq.clearHistory();
      const items = tokens.map(
        (id): ControlledEvaluateInputItem => [id as Token, { generateNext: { probabilities: true, options: { temperature: 0 } } }],
      );
      const out = await seq.controlledEvaluate(items);
      const ours = trainerDistributions(model, tokens);
      for (let t = 0; t + 1 < tokens.length; t++) {
        const probs = out[t]?.next.probabilities;
        if (!probs || probs.size === 0) throw new ArborError(`engine agreement: llama.cpp returned no distribution at position ${t}`, "engine");
        const next = tokens[t + 1] as number;
        const engineP = probs.get(next as Token) ?? 0;
        const d = Math.abs(Math.log(ours[t * V + next] as number) - Math.log(engineP));
        sumAbs += d;
        maxAbs = Math.max(maxAbs, d);
        positions++;
        for (let v = 0; v < V; v++) maxProb = Math.max(maxProb, Math.abs((ours[t * V + v] as number) - (probs.get(v as Token) ?? 0)));
      }
    }
  } finally {
    await context.dispose();
    await llm.dispose();
  }
  return {
    sequences: sequences.length,
    positions,
    maxAbsLogprobDiff: maxAbs,
    meanAbsLogprobDiff: positions === 0 ? 0 : sumAbs / positions,
    maxAbsProbDiff: maxProb,
  };
}
