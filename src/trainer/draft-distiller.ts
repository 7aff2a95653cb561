// A small draft model kept aligned with the moving policy (issue 17 item 6, Forge's answer to acceptance
// decaying as RL moves the policy): the policy's own architecture cut to `layers` blocks, sharing its
// vocabulary and tokenizer, trained with the reference trainer's model code (TinyLlama on tfjs) and Adam on
// the rollout's token sequences, with the policy's top-K next-token distribution at every position as the
// target (Top-K KL, top-k-kl.ts). It starts as the policy's embedding, first `layers` blocks and output head,
// so even an untrained draft proposes something; each weight sync distils it again from the new policy and
// writes `draft-vN.gguf` beside `policy-vN.gguf` (draft-model-path.ts) for llama.cpp to serve.
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import type { TinyLlamaConfig } from "../model/config.js";
import { writeGguf } from "../model/gguf.js";
import type { GgufTokenizerSpec } from "../model/gguf-tokenizer.js";
import type { Tensor } from "../model/weights.js";
import { causalMask } from "./attention-mask.js";
import { clipByGlobalNorm } from "./grad-clip.js";
import { tfWasm } from "./tf-runtime.js";
import { TinyLlama } from "./tiny-llama.js";
import { topKKlLoss, topKTargets, type TopKTargets } from "./top-k-kl.js";

/** How the draft is built and trained (config `train.draftModel`). */
export interface DraftModelOptions {
  /** Transformer blocks of the draft (1..the policy's). */
  layers: number;
  /** Adam steps per distillation (each weight sync). */
  steps: number;
  /** Rollout sequences per step. */
  batch: number;
  lr: number;
  /** Policy tokens kept per position in the target (1..the vocabulary). */
  topK: number;
}

/** Largest number of sequences one distillation takes (the most recent are kept). */
export const MAX_DISTILL_SEQUENCES = 4096;

/**
 * One rollout sequence to distil on: its token ids and, optionally, which tokens the policy generated
 * (`generated[i]` = 1: token i was sampled, so the position before it is where the draft must predict the
 * policy). Without `generated`, every position is trained. Drafts are only asked for at generated positions,
 * so training on prompts (often a long shared system prompt) would spend the draft's capacity elsewhere.
 */
export type DistillSequence = readonly number[] | { tokens: readonly number[]; generated?: readonly number[] };

/** What one distillation did. */
export interface DistillResult {
  /** Mean Top-K KL over the positions of the sequences trained on, before the first and after the last step. */
  lossBefore: number;
  lossAfter: number;
  steps: number;
  /** Positions (tokens) whose targets were computed. */
  positions: number;
}

function fail(field: string, reason: string): never {
  throw new ArborError(`draftModel.${field}: ${reason}`, "config");
}

/** Check `o` against the policy it drafts for; throws ArborError naming the field. */
export function validateDraftModelOptions(o: DraftModelOptions, policy: TinyLlamaConfig): void {
  const int = (field: keyof DraftModelOptions, min: number, max: number): void => {
    const v = o[field];
    if (!Number.isInteger(v) || v < min || v > max) fail(field, `must be an integer in ${min}..${max}, got ${String(v)}`);
  };
  int("layers", 1, policy.nLayer);
  int("steps", 1, 1_000_000);
  int("batch", 1, MAX_DISTILL_SEQUENCES);
  int("topK", 1, policy.nVocab);
  if (!(typeof o.lr === "number" && Number.isFinite(o.lr) && o.lr > 0)) fail("lr", `must be a number > 0, got ${String(o.lr)}`);
}

/** The draft's starting weights: the policy's embedding, norms and output head, and its first `layers` blocks. */
export function truncatedPolicy(policy: readonly Tensor[], layers: number): Tensor[] {
  return policy
    .filter((t) => {
      const m = /^blk\.(\d+)\./.exec(t.name);
      return m === null || Number(m[1]) < layers;
    })
    .map((t) => ({ name: t.name, shape: [...t.shape], data: Float32Array.from(t.data) }));
}

/** Trains and saves the draft model; create with {@link DraftDistiller.create}, `dispose()` when done. */
export class DraftDistiller {
  readonly model: TinyLlama;
  private readonly optimizer: tf.AdamOptimizer;
  private readonly rng: Rng;
  private distillations = 0;

  private constructor(
    readonly policyConfig: TinyLlamaConfig,
    policyTensors: readonly Tensor[],
    readonly tokenizer: GgufTokenizerSpec,
    readonly options: DraftModelOptions,
    seed: number,
  ) {
    validateDraftModelOptions(options, policyConfig);
    this.model = new TinyLlama({ ...policyConfig, nLayer: options.layers }, truncatedPolicy(policyTensors, options.layers));
    this.optimizer = tf.train.adam(options.lr);
    this.rng = new Rng(seed).fork("draft-distiller");
  }

  /** A draft cut from the policy's weights `policyTensors` (of `policyConfig`); initialises tfjs's wasm back-end. */
  static async create(policyConfig: TinyLlamaConfig, policyTensors: readonly Tensor[], tokenizer: GgufTokenizerSpec, options: DraftModelOptions, seed = 0): Promise<DraftDistiller> {
    await tfWasm();
    return new DraftDistiller(policyConfig, policyTensors, tokenizer, options, seed);
  }

  get config(): TinyLlamaConfig {
    return this.model.config;
  }

  /**
   * Distil the policy `policy` (same vocabulary) into the draft on `sequences` (rollout token ids, prompt and
   * output): `steps` Adam steps, each on `batch` sequences drawn at random, on the mean Top-K KL over all
   * their positions. Sequences are cut to the context; empty ones are skipped; only the most recent
   * {@link MAX_DISTILL_SEQUENCES} are used. Throws ArborError when no sequence is left or the vocabularies differ.
   */
  distill(policy: TinyLlama, sequences: readonly DistillSequence[]): DistillResult {
    if (policy.config.nVocab !== this.config.nVocab) {
      throw new ArborError(`draft model: the policy's vocabulary (${policy.config.nVocab}) differs from the draft's (${this.config.nVocab})`, "trainer");
    }
    const ctx = Math.min(policy.config.contextLength, this.config.contextLength);
    const pool = sequences
      .slice(-MAX_DISTILL_SEQUENCES)
      .map((s) => trainedRows(s, ctx))
      .filter((s) => s.rows.length > 0);
    if (pool.length === 0) throw new ArborError("draft model: no rollout tokens to distil from (every sequence is empty or has no generated token)", "trainer");
    const draws = this.rng.fork(`distill-${this.distillations++}`);
    const plan = Array.from({ length: this.options.steps }, () => Array.from({ length: Math.min(this.options.batch, pool.length) }, () => draws.int(0, pool.length - 1)));
    const used = [...new Set(plan.flat())];
    const targets = new Map<number, TopKTargets>();
    const seq = (i: number): Rows => pool[i] as Rows;
    for (const i of used) targets.set(i, policyTargets(policy, seq(i), this.options.topK));
    const positions = used.reduce((a, i) => a + seq(i).rows.length, 0);
    const evaluate = (): number => tf.tidy(() => used.reduce((a, i) => a + klOf(this.model, seq(i), targets.get(i) as TopKTargets).dataSync()[0]! * seq(i).rows.length, 0) / positions);

    const lossBefore = evaluate();
    const vars = [...this.model.params.values()];
    for (const step of plan) {
      const rows = step.reduce((a, i) => a + seq(i).rows.length, 0);
      const { value, grads } = tf.variableGrads(() => {
        // Weighted by trained positions, so the step's loss is the mean over all its positions.
        const parts = step.map((i) => tf.mul(klOf(this.model, seq(i), targets.get(i) as TopKTargets), seq(i).rows.length / rows));
        return tf.addN(parts) as tf.Scalar;
      }, vars);
      value.dispose();
      const { grads: clipped } = clipByGlobalNorm(grads, 1);
      this.optimizer.applyGradients(Object.entries(clipped).map(([name, tensor]) => ({ name, tensor })));
      tf.dispose(clipped);
    }
    return { lossBefore, lossAfter: evaluate(), steps: plan.length, positions };
  }

  /** Write the draft as a GGUF llama.cpp loads (the policy's tokenizer; `arbor.policy_version` = `version`). */
  save(path: string, version: number): void {
    writeGguf(path, {
      config: this.config,
      tokenizer: this.tokenizer,
      tensors: this.model.toTensors(),
      metadata: { "general.name": "arbor-draft", "arbor.policy_version": version, "arbor.draft_layers": this.options.layers },
    });
  }

  /** Free the weights and optimizer state. */
  dispose(): void {
    this.optimizer.dispose();
    this.model.dispose();
  }
}

/** A sequence cut to the context and the positions trained (each predicts the next token). */
interface Rows {
  tokens: readonly number[];
  rows: number[];
}

function trainedRows(s: DistillSequence, ctx: number): Rows {
  const tokens = (Array.isArray(s) ? s : (s as { tokens: readonly number[] }).tokens).slice(0, ctx);
  const generated = Array.isArray(s) ? undefined : (s as { generated?: readonly number[] }).generated;
  if (generated === undefined) return { tokens, rows: tokens.map((_, i) => i) };
  if (generated.length < tokens.length) throw new ArborError(`draft model: generated has ${generated.length} entries for ${tokens.length} tokens`, "trainer");
  const rows: number[] = [];
  for (let i = 1; i < tokens.length; i++) if (generated[i] === 1) rows.push(i - 1);
  return { tokens, rows };
}

/** The policy's top-K distribution at the trained positions of `s` (no gradient). */
function policyTargets(policy: TinyLlama, s: Rows, topK: number): TopKTargets {
  const logits = tf.tidy(() => logitsOf(policy, s).dataSync() as Float32Array);
  return topKTargets(logits, policy.config.nVocab, topK);
}

function logitsOf(model: TinyLlama, s: Rows): tf.Tensor2D {
  const n = s.tokens.length;
  const positions = Array.from({ length: n }, (_, i) => i);
  return model.logits(model.hidden(s.tokens, positions, { kind: "dense", mask: causalMask(n) }), s.rows);
}

function klOf(model: TinyLlama, s: Rows, targets: TopKTargets): tf.Scalar {
  return topKKlLoss(logitsOf(model, s), targets);
}
