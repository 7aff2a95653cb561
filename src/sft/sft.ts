// Supervised fine-tuning of the tiny policy on an environment's golden conversations: each step packs a
// batch of golden samples into a prefix tree (they share the system prompt, so it is computed once),
// takes one reference-trainer step with the SFT loss (token-mean cross-entropy on assistant tokens)
// and, at the end, writes the weights as a GGUF the engines load. Deterministic for its seeds.
// Length rule: a conversation longer than the policy's context (`contextLength`, 2048 for the shipped shape;
// search-qa and swe-mini goldens reach ~2,600 tokens) is truncated to its first `contextLength` tokens — the
// loss stays on the assistant tokens that remain, as a max-length SFT collator does — and the run reports how
// many were cut. A longer sample would ask the trainer for positions the model was not built for.
// Held-out tasks: drawn with seed taskSeed + 1 from a generated environment; from a fixed pool (swe-mini) the
// pool's seeded order is split instead — the first `tasks` train, the next `evalTasks` are held out — so the
// two never overlap.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import { buildPackedTree } from "../batch/tree/build-tree.js";
import type { PackedTree } from "../batch/tree/packed-tree.js";
import { createEnvironment } from "../envs/registry.js";
import type { Task } from "../envs/env.js";
import { nativeConversation } from "../envs/native-tools.js";
import { fromEnvTool } from "../agents/agent-tool.js";
import { declaredToolSpecs } from "../agents/tool-modes.js";
import type { ChatMessage } from "../core/types.js";
import { tinyConfig } from "../model/config.js";
import { writeGguf } from "../model/gguf.js";
import type { PolicyInit } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import { initWeights } from "../model/weights.js";
import { Trainer } from "../trainer/trainer.js";
import { scheduledLr } from "../trainer/lr-schedule.js";
import { goldenSample, type SftSample } from "./golden-samples.js";
import { sftModelFromGguf, sftModelOf, type SftModel, type SftVocab } from "./sft-model.js";

export interface SftOptions {
  /** Environment whose golden conversations are the training data (e.g. "calc"). */
  env: string;
  /** Distinct training tasks and their seed. */
  tasks: number;
  taskSeed: number;
  /** Held-out tasks scored every `evalEvery` steps (seed taskSeed + 1, so never among the training tasks). */
  evalTasks?: number;
  evalEvery?: number;
  /** Start from this GGUF, or from seeded random weights of this shape. */
  init: { path: string } | PolicyInit;
  /**
   * Vocabulary and chat template of a fresh model (`init` of a shape; default "arbor"): Arbor's, or a
   * made-here one (`bpe-chatml`, `spm-llama3`). A GGUF `init` keeps its own.
   */
  vocab?: SftVocab;
  /**
   * How golden turns call tools (default "markup"): `native` renders them as the model's own
   * tool calls with the environment's tools declared, as a run with `agent.toolMode: native` asks.
   */
  toolMode?: "markup" | "native";
  steps: number;
  batchSize: number;
  lr: number;
  /**
   * Learning-rate schedule: `constant` (default), or `cosine` — linear warm-up over `warmupSteps`, then
   * cosine decay to a tenth of `lr` at the last step (lower final loss for the same steps).
   */
  schedule?: "constant" | "cosine";
  warmupSteps?: number;
  maxGradNorm?: number;
  /** Seed of the batch order. */
  seed: number;
  /** Where to write the trained GGUF. */
  out: string;
  /** Also write `out` every this many steps (a long run can be inspected or stopped early). */
  saveEvery?: number;
  clock?: Clock;
  /** Called after every step (progress bars, logs); awaited, so a caller can yield to pending signals. */
  onStep?: (s: SftStep) => void | Promise<void>;
  /** Stops training after the current step; the weights so far are written to `out` (nothing is lost). */
  signal?: AbortSignal;
}

export interface SftStep {
  step: number;
  steps: number;
  loss: number;
  gradNorm: number;
  /** Mean loss per assistant token of the held-out tasks, when evaluated at this step. */
  evalLoss?: number;
  /** Fraction of held-out assistant tokens the policy ranks first (greedy next-token accuracy). */
  evalAccuracy?: number;
}

export interface SftResult {
  out: string;
  /** Training samples cut to the model's context (see the length rule at the top of this file), and their count. */
  truncated: number;
  samples: number;
  /** Steps taken (fewer than asked when `signal` stopped the run). */
  steps: number;
  stopped: boolean;
  firstLoss: number;
  lastLoss: number;
  evalLoss?: number;
  evalAccuracy?: number;
}

/**
 * The training and held-out samples of `opts`: disjoint draws (see the top of this file). Throws an
 * ArborError naming the numbers when a fixed pool is too small for both.
 */
export function sftSplit(
  opts: Pick<SftOptions, "env" | "tasks" | "taskSeed" | "evalTasks" | "toolMode">,
  model: SftModel = sftModelOf("arbor"),
): { train: SftSample[]; held: SftSample[] } {
  const e = createEnvironment(opts.env);
  const evalTasks = opts.evalTasks ?? 0;
  const native = opts.toolMode === "native";
  // Native: the tools as the agent declares them in its requests, so prompts match the rollout's exactly.
  const tools = native ? declaredToolSpecs(e.tools().map(fromEnvTool)) : undefined;
  const golden = (t: Task): ChatMessage[] => (native ? nativeConversation(e, e.golden(t)) : e.golden(t));
  const render = (ts: readonly Task[]): SftSample[] => ts.map((t) => goldenSample(golden(t), { format: model.format, stopIds: model.stopIds, ...(tools ? { tools } : {}) }));
  if (e.taskCount === undefined) return { train: render(e.tasks(opts.tasks, opts.taskSeed)), held: evalTasks > 0 ? render(e.tasks(evalTasks, opts.taskSeed + 1)) : [] };
  if (opts.tasks + evalTasks > e.taskCount) {
    throw new ArborError(`sft: ${opts.env} has ${e.taskCount} tasks: tasks (${opts.tasks}) + held-out tasks (${evalTasks}) must not exceed it`, "config");
  }
  const all = e.tasks(opts.tasks + evalTasks, opts.taskSeed);
  return { train: render(all.slice(0, opts.tasks)), held: render(all.slice(opts.tasks)) };
}

/**
 * `sample` cut to its first `contextLength` tokens (the length rule at the top of this file); the sample
 * itself when it fits. Undefined when no assistant token is left to learn from.
 */
export function truncateToContext(sample: SftSample, contextLength: number): SftSample | undefined {
  if (sample.tokenIds.length <= contextLength) return sample;
  const lossMask = sample.lossMask.slice(0, contextLength);
  return lossMask.includes(1) ? { tokenIds: sample.tokenIds.slice(0, contextLength), lossMask } : undefined;
}

/** Pack samples into one tree whose term weights average the loss over all their assistant tokens. */
export function sftTree(samples: readonly SftSample[]): PackedTree {
  const total = samples.reduce((n, s) => n + s.lossMask.reduce((a, b) => a + b, 0), 0);
  if (total === 0) throw new ArborError("sft: the batch has no assistant tokens", "sft");
  return buildPackedTree(
    samples.map((s) => ({
      tokenIds: s.tokenIds,
      lossMask: s.lossMask,
      advantages: s.tokenIds.map(() => 0),
      oldLogprobs: s.tokenIds.map(() => 0),
      weights: s.lossMask.map((m) => m / total),
    })),
  ).tree;
}

function check(opts: SftOptions): void {
  const positive = (field: string, v: number): void => {
    if (!Number.isInteger(v) || v < 1) throw new ArborError(`sft: ${field} must be an integer >= 1, got ${v}`, "config");
  };
  positive("tasks", opts.tasks);
  positive("steps", opts.steps);
  positive("batchSize", opts.batchSize);
  if (opts.batchSize > opts.tasks) throw new ArborError(`sft: batchSize (${opts.batchSize}) must not exceed tasks (${opts.tasks})`, "config");
  if (!(opts.lr > 0)) throw new ArborError(`sft: lr must be > 0, got ${opts.lr}`, "config");
  if (opts.warmupSteps !== undefined && (!Number.isInteger(opts.warmupSteps) || opts.warmupSteps < 0 || opts.warmupSteps >= opts.steps)) {
    throw new ArborError(`sft: warmupSteps must be an integer in [0, steps), got ${opts.warmupSteps}`, "config");
  }
}

async function createTrainer(opts: SftOptions, model: SftModel): Promise<Trainer> {
  const trainerOpts = { lr: opts.lr, maxGradNorm: opts.maxGradNorm ?? 1, version: 0, ...(opts.clock ? { clock: opts.clock } : {}) };
  if ("path" in opts.init) return Trainer.fromGguf(opts.init.path, trainerOpts);
  const { seed, ...shape } = opts.init;
  const config = tinyConfig({ nVocab: model.spec.tokens.length, ...shape });
  return Trainer.create(config, initWeights(config, new Rng(seed)), { ...trainerOpts, tokenizer: model.spec });
}

/** Held-out loss per assistant token and greedy token accuracy (from the trainer's logprobs). */
function evaluate(trainer: Trainer, tree: PackedTree): { loss: number; accuracy: number } {
  const lp = trainer.logprobs(tree);
  let sum = 0;
  let likely = 0;
  for (const x of lp) {
    sum -= x;
    // log p > log 0.5 guarantees the target is the argmax; a cheap, conservative accuracy.
    if (x > Math.log(0.5)) likely++;
  }
  return { loss: sum / lp.length, accuracy: likely / lp.length };
}

/** Write the current weights to `opts.out` (policy version 0: the start of RL), with how they were made. */
function save(trainer: Trainer, model: SftModel, opts: SftOptions, step: number): void {
  const made = {
    env: opts.env,
    tasks: opts.tasks,
    taskSeed: opts.taskSeed,
    step,
    steps: opts.steps,
    batchSize: opts.batchSize,
    lr: opts.lr,
    // Only a non-constant schedule is recorded: a constant-rate GGUF keeps the fields it always had.
    ...(opts.schedule === "cosine" ? { schedule: "cosine", warmupSteps: opts.warmupSteps ?? 0 } : {}),
    seed: opts.seed,
    // Only non-default choices are recorded: an Arbor markup GGUF keeps the fields it always had.
    ...(opts.toolMode === "native" ? { toolMode: "native" } : {}),
  };
  writeGguf(opts.out, {
    config: trainer.config,
    ...(model.arbor ? { vocab: new Vocab() } : { tokenizer: model.spec }),
    tensors: trainer.model.toTensors(),
    metadata: { "general.name": "arbor-tiny-llama", "arbor.policy_version": 0, "arbor.sft": JSON.stringify(made) },
  });
}

/**
 * Train on golden conversations and write the GGUF to `opts.out` (policy version 0: the start of RL).
 * Each epoch visits the tasks in a fresh seeded order; a step takes the next `batchSize` of them.
 */
export async function runSft(opts: SftOptions): Promise<SftResult> {
  check(opts);
  const model = "path" in opts.init ? sftModelFromGguf(opts.init.path) : sftModelOf(opts.vocab ?? "arbor");
  const split = sftSplit(opts, model);
  const evalEvery = opts.evalEvery ?? Math.max(1, Math.floor(opts.steps / 10));
  const order = new Rng(opts.seed).fork("sft-order");
  const trainer = await createTrainer(opts, model);
  try {
    const ctx = trainer.config.contextLength;
    const fit = (samples: readonly SftSample[]): SftSample[] => samples.flatMap((s) => truncateToContext(s, ctx) ?? []);
    const train = fit(split.train);
    const truncated = split.train.filter((s) => s.tokenIds.length > ctx).length;
    if (train.length < opts.batchSize) {
      throw new ArborError(`sft: only ${train.length} of ${split.train.length} training conversations keep an assistant token within the model's context of ${ctx} tokens; batchSize is ${opts.batchSize}`, "sft");
    }
    const heldSamples = fit(split.held);
    const held = heldSamples.length > 0 ? sftTree(heldSamples) : undefined;
    let queue: number[] = [];
    let firstLoss = NaN;
    let lastLoss = NaN;
    let lastEval: { loss: number; accuracy: number } | undefined;
    let taken = 0;
    for (let step = 1; step <= opts.steps && opts.signal?.aborted !== true; step++) {
      if (queue.length < opts.batchSize) queue = [...queue, ...order.shuffle(train.map((_, i) => i))];
      const batch = queue.splice(0, opts.batchSize).map((i) => train[i] as SftSample);
      trainer.setLearningRate(scheduledLr(opts.lr, step, opts.steps, opts.schedule, opts.warmupSteps));
      const r = trainer.step({ tree: sftTree(batch), loss: "sft" });
      taken = step;
      if (step === 1) firstLoss = r.loss;
      lastLoss = r.loss;
      const report: SftStep = { step, steps: opts.steps, loss: r.loss, gradNorm: r.gradNorm };
      if (held && (step % evalEvery === 0 || step === opts.steps)) {
        lastEval = evaluate(trainer, held);
        report.evalLoss = lastEval.loss;
        report.evalAccuracy = lastEval.accuracy;
      }
      await opts.onStep?.(report);
      if (opts.saveEvery !== undefined && step % opts.saveEvery === 0 && step < opts.steps) save(trainer, model, opts, step);
    }
    save(trainer, model, opts, taken);
    return {
      out: opts.out,
      truncated,
      samples: split.train.length,
      steps: taken,
      stopped: taken < opts.steps,
      firstLoss,
      lastLoss,
      ...(lastEval ? { evalLoss: lastEval.loss, evalAccuracy: lastEval.accuracy } : {}),
    };
  } finally {
    trainer.dispose();
  }
}
