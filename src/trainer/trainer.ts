// The reference trainer: the tiny llama policy on tfjs (wasm), one or more optimizer steps per packed batch —
// term logprobs in the tree (or flat) layout, the batch's loss (policy-gradient LossSpec or SFT),
// gradients of every parameter, global-norm clipping, Adam — and versioned GGUF checkpoints for the
// engines. The policy version advances by one per batch, however many optimizer steps (epochs) it took. Every sample must fit the model's context,
// and a batch too large for one pass is split into micro-batches whose gradients are summed before the one
// update (micro-batches.ts), so memory per step is bounded whatever the batch size.
import * as tf from "@tensorflow/tfjs";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { referenceLoss, type LossSpec } from "../batch/estimators/loss-spec.js";
import type { PackedTree } from "../batch/tree/packed-tree.js";
import type { TinyLlamaConfig } from "../model/config.js";
import { configFromGguf, readGguf, vocabTokenizerSpec } from "../model/gguf.js";
import { tokenizerSpecFromGguf, type GgufTokenizerSpec } from "../model/gguf-tokenizer.js";
import { Vocab } from "../model/vocab.js";
import type { Tensor } from "../model/weights.js";
import { readSafetensors, writeSafetensors, type AnyTensor } from "../model/safetensors.js";
import { writeCheckpoint, type CheckpointManifest } from "./checkpoint.js";
import { clipByGlobalNorm } from "./grad-clip.js";
import { compileLrScale, withLrScale, type LrScale } from "./lr-scale.js";
import { layoutTokens, termLogprobs, termOutputs, type Layout } from "./layouts.js";
import { policyLoss, sftLoss } from "./losses.js";
import { checkContext, DEFAULT_MAX_STEP_BYTES, planMicroBatches, type MicroBatch } from "./micro-batches.js";
import { tfWasm } from "./tf-runtime.js";
import { TinyLlama } from "./tiny-llama.js";
import { meanEntropy } from "./token-entropy.js";

/** One training batch: a packed tree (K's layout) and how to score its terms. */
export interface TrainBatch {
  tree: PackedTree;
  /** Ratio unit of each term (see batch/tree/tree-batch.ts); may be omitted for ratio "token" and SFT. */
  termUnit?: Int32Array;
  /** A policy-gradient loss, or "sft" for cross-entropy on the terms' targets weighted by `weight`. */
  loss: LossSpec | "sft";
  /** Id of each sample (e.g. the batch sample's id), named by the error of a sample longer than the context. */
  sampleIds?: readonly string[];
}

export interface TrainerOptions {
  /** Adam learning rate (default 1e-3). */
  lr?: number;
  beta1?: number;
  beta2?: number;
  epsilon?: number;
  /** Global gradient-norm limit (default 1; Infinity disables clipping). */
  maxGradNorm?: number;
  /** Batch layout for `step` (default "tree"). */
  layout?: Layout;
  /** Policy version of the initial weights (default 0). */
  version?: number;
  /**
   * Estimated bytes of activations one forward/backward pass may keep (default 1 GiB): a larger batch is
   * split into micro-batches by sample and their gradients summed (the step is the same, up to rounding).
   */
  maxStepBytes?: number;
  clock?: Clock;
  /**
   * The model's tokenizer and chat template, written into every checkpoint (default: Arbor's
   * vocabulary; `fromGguf` takes the file's own), so a checkpoint of any model keeps its vocabulary.
   */
  tokenizer?: GgufTokenizerSpec;
  /**
   * Learning-rate multipliers per parameter (GGUF name or pattern with `*` → multiplier; trainer/lr-scale.ts),
   * e.g. `{ "output_norm.weight": 100 }`: that tensor steps at 100 × lr.
   */
  lrScale?: Readonly<Record<string, number>>;
}

/** How `Trainer.step` treats its batch. */
export interface StepOptions {
  /**
   * Optimizer steps on the same batch (default 1). Each recomputes the term logprobs under the weights the
   * previous one left, so from the second on the PPO ratio against the batch's behaviour logprobs moves off 1
   * and the clip (and dual clip) bound what the batch can still move; the version advances by one in all.
   */
  epochs?: number;
  /** Adam's learning rate for optimizer step `n` (1-based, counted over the trainer's life: `stepCount + 1`). */
  lrAt?: (optimizerStep: number) => number;
}

/** What one epoch (optimizer step) on the batch did. */
export interface EpochResult {
  loss: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  clipFraction: number;
  dualClipFraction: number;
  /** Learning rate the step ran at. */
  lr: number;
}

/** What one step did. */
export interface StepResult {
  /** Loss of the first epoch (under the weights the batch was sampled from, up to engine/trainer mismatch). */
  loss: number;
  /** Global gradient norm before clipping, of the first epoch. */
  gradNorm: number;
  /** Tokens run through the model (tree nodes, or the sum of sample lengths in the flat layout; summed over micro-batches). */
  tokens: number;
  /** Forward/backward passes the step was split into (1 unless the batch exceeded `maxStepBytes`). */
  microBatches: number;
  terms: number;
  /** Wall time of the step on the trainer's clock. */
  ms: number;
  /** Fraction of terms clipped, averaged over the epochs (the first is ~0: its ratio is ~1). */
  clipFraction: number;
  /** Fraction of terms the dual clip bounded (LossSpec.clipRatioC), averaged over the epochs. */
  dualClipFraction: number;
  /** KL(sampling policy ‖ trainer before the step), k3 estimator per term (loss-spec.ts); 0 for SFT. */
  kl: number;
  /**
   * The policy's mean token entropy (nats) over the batch's loss terms, from the trainer's own logits under the
   * weights before the step (the first epoch's forward pass): −Σ_v π(v) log π(v) at each term, averaged.
   */
  entropy: number;
  maskedUnits: number;
  /** Policy version after the step. */
  version: number;
  /** Each optimizer step on the batch, in order (one unless `StepOptions.epochs` > 1). */
  epochs: EpochResult[];
}

/** Loss, term logprobs and per-parameter gradients of a batch, without updating anything. */
export interface BatchGradients {
  loss: number;
  logprobs: Float32Array;
  /** Gradient of each parameter, by GGUF name. */
  grads: Map<string, Float32Array>;
}

/** The reference trainer. Create with {@link Trainer.create} or {@link Trainer.fromGguf}; `dispose()` when done. */
export class Trainer {
  readonly model: TinyLlama;
  private readonly optimizer: tf.AdamOptimizer;
  private readonly clock: Clock;
  private readonly maxGradNorm: number;
  private readonly layout: Layout;
  private readonly maxStepBytes: number;
  private readonly lrScale: LrScale;
  private steps = 0;
  private currentVersion: number;
  /** What checkpoints carry as their tokenizer (see TrainerOptions.tokenizer; absent: Arbor's vocabulary). */
  readonly tokenizer: GgufTokenizerSpec | undefined;

  private constructor(config: TinyLlamaConfig, tensors: readonly Tensor[], opts: TrainerOptions) {
    const lr = opts.lr ?? 1e-3;
    if (!(lr > 0)) throw new ArborError(`trainer: lr must be > 0, got ${lr}`, "config");
    this.maxGradNorm = opts.maxGradNorm ?? 1;
    if (!(this.maxGradNorm > 0)) throw new ArborError(`trainer: maxGradNorm must be > 0, got ${this.maxGradNorm}`, "config");
    this.layout = opts.layout ?? "tree";
    this.maxStepBytes = opts.maxStepBytes ?? DEFAULT_MAX_STEP_BYTES;
    if (!(this.maxStepBytes > 0)) throw new ArborError(`trainer: maxStepBytes must be > 0, got ${this.maxStepBytes}`, "config");
    this.currentVersion = opts.version ?? 0;
    this.tokenizer = opts.tokenizer;
    this.clock = opts.clock ?? realClock;
    this.model = new TinyLlama(config, tensors);
    this.optimizer = tf.train.adam(lr, opts.beta1 ?? 0.9, opts.beta2 ?? 0.999, opts.epsilon ?? 1e-8);
    try {
      this.lrScale = compileLrScale(opts.lrScale ?? {}, [...this.model.params.keys()]);
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  /** A trainer over the given weights (initialises the wasm back-end first). */
  static async create(config: TinyLlamaConfig, tensors: readonly Tensor[], opts: TrainerOptions = {}): Promise<Trainer> {
    await tfWasm();
    return new Trainer(config, tensors, opts);
  }

  /** A trainer starting from a GGUF checkpoint; its version is the file's `arbor.policy_version` unless given. */
  static async fromGguf(path: string, opts: TrainerOptions = {}): Promise<Trainer> {
    const file = readGguf(path);
    const stored = file.metadata.get("arbor.policy_version");
    const version = opts.version ?? (typeof stored === "number" ? stored : 0);
    const tokenizer = opts.tokenizer ?? tokenizerSpecFromGguf(file.metadata, path);
    return Trainer.create(configFromGguf(file.metadata, path), file.tensors, { ...opts, version, tokenizer });
  }

  get config(): TinyLlamaConfig {
    return this.model.config;
  }

  /** Policy version of the current weights. */
  get version(): number {
    return this.currentVersion;
  }

  /** Adam's learning rate from the next step on (schedules set it between steps). */
  setLearningRate(lr: number): void {
    if (!(lr > 0)) throw new ArborError(`trainer: lr must be > 0, got ${lr}`, "config");
    // tfjs reads the field on every applyGradients; it has no public setter.
    (this.optimizer as unknown as { learningRate: number }).learningRate = lr;
  }

  /** Adam's current learning rate. */
  get learningRate(): number {
    return (this.optimizer as unknown as { learningRate: number }).learningRate;
  }

  /** Optimizer steps applied. */
  get stepCount(): number {
    return this.steps;
  }

  /** Term logprobs of `tree` under the current weights (no gradient, no update). */
  logprobs(tree: PackedTree, layout: Layout = this.layout): Float32Array {
    checkContext(tree, this.config.contextLength);
    const out = new Float32Array(tree.terms.node.length);
    for (const mb of planMicroBatches(tree, this.config, layout, this.maxStepBytes)) {
      const lp = tf.tidy(() => termLogprobs(this.model, mb.tree, layout).dataSync() as Float32Array);
      mb.terms.forEach((j, i) => (out[j] = lp[i] as number));
    }
    return out;
  }

  /** Loss and gradients of every parameter for `batch` in `layout`; the weights are not changed. */
  gradients(batch: TrainBatch, layout: Layout = this.layout): BatchGradients {
    const { loss, grads, logprobs } = this.lossAndGrads(batch, layout);
    const out = new Map<string, Float32Array>();
    for (const [name, g] of Object.entries(grads)) {
      out.set(this.model.nameOf(name), Float32Array.from(g.dataSync() as Float32Array));
      g.dispose();
    }
    return { loss, logprobs, grads: out };
  }

  /**
   * One training step on `batch`: `epochs` optimizer updates (loss, gradients, global-norm clip, Adam), each on
   * the weights the previous one left; the version advances by one.
   */
  step(batch: TrainBatch, opts: StepOptions = {}): StepResult {
    const epochs = opts.epochs ?? 1;
    if (!Number.isInteger(epochs) || epochs < 1) throw new ArborError(`trainer: epochs must be an integer ≥ 1, got ${epochs}`, "config");
    const start = this.clock.now();
    const done: EpochResult[] = [];
    let first: { tokens: number; microBatches: number; kl: number; maskedUnits: number; logprobs: Float32Array; entropy: number } | undefined;
    for (let e = 0; e < epochs; e++) {
      const lr = opts.lrAt?.(this.steps + 1);
      if (lr !== undefined) this.setLearningRate(lr);
      // The mismatch mask compares the engine with the trainer's weights *before* the batch's first update.
      // Entropy is read on the first epoch only: the weights before the step, like the loss and KL reported.
      const { loss, grads, logprobs, tokens, microBatches, entropy } = this.lossAndGrads(batch, this.layout, first?.logprobs, first === undefined);
      let clipped: tf.NamedTensorMap;
      let gradNorm: number;
      try {
        ({ norm: gradNorm, grads: clipped } = clipByGlobalNorm(grads, this.maxGradNorm));
      } catch (err) {
        tf.dispose(grads);
        throw err;
      }
      try {
        withLrScale(this.lrScale, (name) => this.model.param(name), () => this.optimizer.applyGradients(Object.entries(clipped).map(([name, tensor]) => ({ name, tensor }))));
      } finally {
        tf.dispose(clipped);
      }
      this.steps++;
      const stats =
        batch.loss === "sft"
          ? { clipFraction: 0, dualClipFraction: 0, kl: 0, maskedUnits: 0 }
          : referenceLoss(batch.loss, { ...this.lossInput(batch, logprobs), trainerOldLogprob: first?.logprobs ?? logprobs });
      first ??= { tokens, microBatches, kl: stats.kl, maskedUnits: stats.maskedUnits, logprobs, entropy: meanEntropy(entropy ?? []) };
      done.push({ loss, gradNorm, clipFraction: stats.clipFraction, dualClipFraction: stats.dualClipFraction, lr: this.learningRate });
    }
    this.currentVersion++;
    const head = done[0] as EpochResult;
    const f = first as NonNullable<typeof first>;
    const mean = (k: "clipFraction" | "dualClipFraction") => done.reduce((a, d) => a + d[k], 0) / done.length;
    return {
      loss: head.loss,
      gradNorm: head.gradNorm,
      tokens: f.tokens,
      microBatches: f.microBatches,
      terms: batch.tree.terms.node.length,
      ms: this.clock.now() - start,
      clipFraction: mean("clipFraction"),
      dualClipFraction: mean("dualClipFraction"),
      kl: f.kl,
      entropy: f.entropy,
      maskedUnits: f.maskedUnits,
      version: this.currentVersion,
      epochs: done,
    };
  }

  /** Publish the current weights as `policy-v{version}.gguf` in `dir` and update its manifest. */
  checkpoint(dir: string, keep?: number): { path: string; manifest: CheckpointManifest } {
    return writeCheckpoint({
      dir,
      version: this.currentVersion,
      config: this.config,
      tokenizer: this.tokenizer ?? vocabTokenizerSpec(new Vocab()),
      tensors: this.model.toTensors(),
      steps: this.steps,
      now: this.clock.now(),
      ...(keep === undefined ? {} : { keep }),
    });
  }

  /**
   * Write Adam's state (both moments of every parameter, by GGUF name, and the step count) to `path` as
   * safetensors, atomically: with the checkpoint of the same version it lets a killed run continue with the
   * very next step the uninterrupted run would have taken.
   */
  async saveOptimizerState(path: string): Promise<void> {
    const weights = await this.optimizer.getWeights();
    const [iterations, ...moments] = weights;
    const tensors: AnyTensor[] = moments.map((w) => {
      // tfjs names each moment `${variable}/m` or `${variable}/v`; the variable name is this instance's.
      const slash = w.name.lastIndexOf("/");
      const kind = w.name.slice(slash + 1);
      return { name: `${kind}/${this.model.nameOf(w.name.slice(0, slash))}`, shape: [...w.tensor.shape], data: Float32Array.from(w.tensor.dataSync() as Float32Array) };
    });
    const steps = iterations ? (iterations.tensor.dataSync()[0] as number) : 0;
    iterations?.tensor.dispose();
    writeSafetensors(path, tensors, { format: "arbor-adam-1", iterations: String(steps), trainerSteps: String(this.steps) });
  }

  /**
   * Restore Adam's state written by {@link saveOptimizerState} (moments in the order they were written, which
   * is the order tfjs applies gradients in) and the step count, into a trainer that has not stepped yet.
   * @throws ArborError when the file is not such a state or a moment does not match a parameter's shape.
   */
  async loadOptimizerState(path: string): Promise<void> {
    const { tensors, metadata } = readSafetensors(path);
    if (metadata.format !== "arbor-adam-1") throw new ArborError(`trainer: ${path} is not an Arbor optimizer state (metadata format 'arbor-adam-1')`, "checkpoint");
    const iterations = Number(metadata.iterations);
    const trainerSteps = Number(metadata.trainerSteps);
    if (!Number.isInteger(iterations) || iterations < 0 || !Number.isInteger(trainerSteps) || trainerSteps < 0) {
      throw new ArborError(`trainer: ${path}: iterations and trainerSteps must be integers >= 0`, "checkpoint");
    }
    const first = tensors.filter((t) => t.name.startsWith("m/"));
    const second = tensors.filter((t) => t.name.startsWith("v/"));
    if (first.length !== second.length || first.length + second.length !== tensors.length) {
      throw new ArborError(`trainer: ${path}: expected pairs of m/<param> and v/<param> tensors`, "checkpoint");
    }
    const named = [...first, ...second].map((t) => {
      const param = t.name.slice(2);
      const v = this.model.param(param);
      if (v.shape.join("x") !== t.shape.join("x")) {
        throw new ArborError(`trainer: ${path}: moment ${t.name} has shape [${t.shape.join(", ")}], the parameter [${v.shape.join(", ")}]`, "checkpoint");
      }
      return { name: `${v.name}/${t.name.slice(0, 1)}`, tensor: tf.tensor(t.data, t.shape, "float32") };
    });
    const iter = { name: "iter", tensor: tf.scalar(iterations, "int32") };
    try {
      await this.optimizer.setWeights([iter, ...named]);
    } finally {
      // setWeights copies each tensor into a variable of its own.
      tf.dispose([iter.tensor, ...named.map((n) => n.tensor)]);
    }
    this.steps = trainerSteps;
  }

  /** Free the weights and optimizer state. */
  dispose(): void {
    this.optimizer.dispose();
    this.model.dispose();
  }

  private lossInput(batch: TrainBatch, logprob: Float32Array) {
    const t = batch.tree.terms;
    return { logprob, oldLogprob: t.oldLogprob, advantage: t.advantage, weight: t.weight, unit: this.units(batch) };
  }

  private units(batch: TrainBatch): Int32Array {
    const n = batch.tree.terms.node.length;
    if (batch.termUnit) {
      if (batch.termUnit.length !== n) throw new ArborError(`trainer: termUnit has ${batch.termUnit.length} entries for ${n} terms`, "trainer");
      return batch.termUnit;
    }
    if (batch.loss !== "sft" && batch.loss.ratio !== "token") {
      throw new ArborError(`trainer: a '${batch.loss.ratio}' ratio needs the batch's termUnit`, "trainer");
    }
    return Int32Array.from({ length: n }, (_, i) => i);
  }

  /**
   * Loss, summed gradients and term logprobs of `batch` over its micro-batches (one when it fits
   * `maxStepBytes`). Micro-batches without loss terms are skipped: they add nothing to either.
   */
  private lossAndGrads(
    batch: TrainBatch,
    layout: Layout,
    trainerOld?: Float32Array,
    withEntropy = false,
  ): { loss: number; grads: tf.NamedTensorMap; logprobs: Float32Array; tokens: number; microBatches: number; entropy?: Float32Array } {
    const unit = this.units(batch);
    if (batch.tree.terms.node.length === 0) throw new ArborError("trainer: the batch has no loss terms (every token is masked)", "trainer");
    checkContext(batch.tree, this.config.contextLength, batch.sampleIds);
    const plan = planMicroBatches(batch.tree, this.config, layout, this.maxStepBytes, { entropy: withEntropy }).filter((mb) => mb.terms.length > 0);
    const logprobs = new Float32Array(batch.tree.terms.node.length);
    const entropy = withEntropy ? new Float32Array(batch.tree.terms.node.length) : undefined;
    let grads: tf.NamedTensorMap = {};
    let loss = 0;
    let tokens = 0;
    try {
      for (const mb of plan) {
        const old = trainerOld && Float32Array.from(mb.terms, (j) => trainerOld[j] as number);
        const r = this.microLossAndGrads(batch.loss, mb, Int32Array.from(mb.terms, (j) => unit[j] as number), layout, old, withEntropy);
        loss += r.value.dataSync()[0] as number;
        r.value.dispose();
        mb.terms.forEach((j, i) => (logprobs[j] = r.logprobs[i] as number));
        if (entropy && r.entropy) mb.terms.forEach((j, i) => (entropy[j] = r.entropy?.[i] as number));
        tokens += layoutTokens(mb.tree, layout);
        const sum: tf.NamedTensorMap = {};
        for (const [name, g] of Object.entries(r.grads)) {
          const prev = grads[name];
          sum[name] = prev ? tf.add(prev, g) : g;
          if (prev) {
            prev.dispose();
            g.dispose();
          }
        }
        grads = { ...grads, ...sum };
      }
    } catch (err) {
      tf.dispose(grads);
      throw err;
    }
    return { loss, grads, logprobs, tokens, microBatches: plan.length, ...(entropy ? { entropy } : {}) };
  }

  private microLossAndGrads(
    spec: LossSpec | "sft",
    mb: MicroBatch,
    unit: Int32Array,
    layout: Layout,
    trainerOld: Float32Array | undefined,
    withEntropy: boolean,
  ): { value: tf.Scalar; grads: tf.NamedTensorMap; logprobs: Float32Array; entropy?: Float32Array } {
    let logprobs = new Float32Array(0);
    let entropy: Float32Array | undefined;
    const { value, grads } = tf.variableGrads(() => {
      const out = termOutputs(this.model, mb.tree, layout, withEntropy);
      const lp = out.logprob;
      logprobs = Float32Array.from(lp.dataSync() as Float32Array);
      // Read as values only: the entropy is not part of the loss, so it adds nothing to the gradients.
      if (out.entropy) entropy = Float32Array.from(out.entropy.dataSync() as Float32Array);
      const t = mb.tree.terms;
      return spec === "sft"
        ? sftLoss(lp, t.weight)
        : policyLoss(spec, lp, { oldLogprob: t.oldLogprob, advantage: t.advantage, weight: t.weight, unit, trainerOldLogprob: trainerOld ?? logprobs });
    }, [...this.model.params.values()]);
    return { value, grads, logprobs, ...(entropy ? { entropy } : {}) };
  }
}
