// Run tracking (issue 19): every run appends one JSON line per iteration (sync) or trainer step (async)
// to `metrics.jsonl` in its output folder — rewards and their components, loss, gradient norm, clip
// fraction, KL (sampling policy to trainer), the policy's token entropy, lengths, staleness, throughput and timings — so that curves can be drawn by any tool
// (pandas, jq, a dashboard) without parsing stdout. Unknown values (an external trainer's loss) are
// null, never NaN, so every line is valid JSON. Lines are appended as each step ends: a killed run
// keeps the lines of the steps it finished. The same numbers go to TensorBoard event files in the
// folder's `tensorboard/` (tensorboard-events.ts), tagged by group (`reward/mean`, `train/loss`, …).
// Held-out evaluation (held-out-eval.ts) adds its score to the line of the step after which it ran, and
// the starting policy's score is a line of its own (kind `held-out`, index 0); TensorBoard gets `heldout/*`.
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../core/clock.js";
import type { HeldOutScore } from "./held-out-eval.js";
import type { IterationResult } from "./iteration-result.js";
import { numberField, parseMetricsLines } from "./metrics-lines.js";
import { TensorBoardWriter } from "./tensorboard-events.js";

/** A sink of each metrics line's scalars at its step (must not throw; it may post in the background). */
export interface MetricsSink {
  log(step: number, scalars: Record<string, number>, time: number): void;
}

/** One line of metrics.jsonl (field names are stable: tools read them). */
export interface MetricsRecord {
  /** `iteration` (sync: a rollout and its step) or `step` (async: one trainer step). */
  kind: "iteration" | "step";
  /** 1-based index of the iteration or step. */
  index: number;
  /** When the line was written: the run's clock (milliseconds since the Unix epoch on the wall clock). */
  time: number;
  runId: string;
  /** The policy version the trainer held when it took the batch, and the one after its step. */
  policyVersion: number;
  policyVersionAfter: number | null;
  programs: number;
  rewarded: number;
  meanReward: number | null;
  rewardComponents: Record<string, number>;
  terminations: Record<string, number>;
  calls: number;
  toolCalls: number;
  promptTokens: number;
  outputTokens: number;
  /** Output tokens per program. */
  meanOutputTokens: number | null;
  samples: number;
  trainedSamples: number | null;
  stepped: boolean | null;
  loss: number | null;
  gradNorm: number | null;
  clipFraction: number | null;
  /** Learning rate of the step's last optimizer step (train.lrSchedule); null without a step or with an external trainer. */
  lr: number | null;
  /** KL(sampling policy ‖ trainer before the step), k3 estimator. */
  kl: number | null;
  /** The policy's mean token entropy (nats) over the step's loss terms, from the trainer's own logits before the step. */
  entropy: number | null;
  /** Tokens the trainer ran as a prefix tree, and what a flat layout would have run. */
  treeTokens: number | null;
  flatTokens: number | null;
  droppedGroups: number | null;
  stalenessMean: number | null;
  stalenessMax: number | null;
  rolloutMs: number;
  /** The batch built and exported, the trainer step and the weight sync (the held-out evaluation after it is evalMs). */
  trainMs: number;
  /** The held-out evaluation after this step (null when none was due). */
  evalMs: number | null;
  /** Output tokens per second of rollout. */
  outputTokensPerSecond: number | null;
  /** Held-out evaluation after this step (null when none was due). */
  heldOut: HeldOutFields | null;
}

/** A held-out score as metrics carry it: rates as fractions (0.125 = 12.5%). */
export interface HeldOutFields {
  version: number;
  solved: number;
  solvedSe: number;
  /** Paired difference against `baseVersion` (null for the base itself). */
  baseVersion: number;
  diff: number | null;
  diffSe: number | null;
  tasks: number;
  samples: number;
  temperature: number;
}

/** The line of the starting policy's held-out score (before the first step). */
export interface HeldOutRecord {
  kind: "held-out";
  index: number;
  time: number;
  policyVersion: number;
  heldOut: HeldOutFields;
}

/** A held-out score's metrics fields. */
export function heldOutFields(s: HeldOutScore): HeldOutFields {
  return {
    version: s.version,
    solved: s.solved.mean,
    solvedSe: s.solved.se,
    baseVersion: s.baseVersion,
    diff: s.diff ? s.diff.mean : null,
    diffSe: s.diff ? s.diff.se : null,
    tasks: s.tasks,
    samples: s.samples,
    temperature: s.temperature,
  };
}

/** A finite number, else null (JSON has no NaN or Infinity). */
const num = (x: number | undefined | null): number | null => (typeof x === "number" && Number.isFinite(x) ? x : null);

/** The metrics line of one iteration or trainer step. */
export function metricsRecord(r: IterationResult, kind: MetricsRecord["kind"], time: number): MetricsRecord {
  const u = r.update;
  const s = r.stats;
  return {
    kind,
    index: r.iteration,
    time,
    runId: r.runId,
    policyVersion: r.policyVersion,
    policyVersionAfter: u ? u.version : null,
    programs: s.programs,
    rewarded: s.rewarded,
    meanReward: num(s.meanReward),
    rewardComponents: r.rewardComponents ?? {},
    terminations: { ...s.terminations },
    calls: s.calls,
    toolCalls: r.toolCalls,
    promptTokens: s.promptTokens,
    outputTokens: s.outputTokens,
    meanOutputTokens: s.programs > 0 ? s.outputTokens / s.programs : null,
    samples: r.samples,
    trainedSamples: u ? u.trainedSamples : null,
    stepped: u ? u.stepped : null,
    loss: num(u?.loss),
    gradNorm: num(u?.gradNorm),
    clipFraction: num(u?.clipFraction),
    lr: num(u?.lr),
    kl: num(u?.kl),
    entropy: num(u?.entropy),
    treeTokens: u ? u.treeTokens : null,
    flatTokens: u ? u.flatTokens : null,
    droppedGroups: u ? u.droppedGroups : null,
    stalenessMean: num(r.staleness?.mean),
    stalenessMax: num(r.staleness?.max),
    rolloutMs: r.rolloutMs,
    trainMs: r.trainMs,
    evalMs: r.evalMs ?? null,
    outputTokensPerSecond: r.rolloutMs > 0 ? num((s.outputTokens * 1000) / r.rolloutMs) : null,
    heldOut: r.heldOut ? heldOutFields(r.heldOut) : null,
  };
}

/** The TensorBoard scalars of a metrics line: every known number, tagged by group. */
export function tensorboardScalars(rec: MetricsRecord): Record<string, number> {
  const out: Record<string, number> = {};
  const put = (tag: string, v: number | null): void => {
    if (v !== null) out[tag] = v;
  };
  put("reward/mean", rec.meanReward);
  for (const [k, v] of Object.entries(rec.rewardComponents)) put(`reward/${k}`, v);
  put("train/loss", rec.loss);
  put("train/grad_norm", rec.gradNorm);
  put("train/clip_fraction", rec.clipFraction);
  put("train/lr", rec.lr);
  put("train/kl", rec.kl);
  put("train/entropy", rec.entropy);
  put("train/trained_samples", rec.trainedSamples);
  put("train/tree_tokens", rec.treeTokens);
  put("train/flat_tokens", rec.flatTokens);
  put("train/dropped_groups", rec.droppedGroups);
  put("policy/version", rec.policyVersion);
  put("policy/version_after", rec.policyVersionAfter);
  put("rollout/programs", rec.programs);
  put("rollout/calls", rec.calls);
  put("rollout/tool_calls", rec.toolCalls);
  put("rollout/output_tokens", rec.outputTokens);
  put("rollout/mean_output_tokens", rec.meanOutputTokens);
  put("rollout/output_tokens_per_second", rec.outputTokensPerSecond);
  for (const [k, v] of Object.entries(rec.terminations)) put(`terminations/${k}`, v);
  put("staleness/mean", rec.stalenessMean);
  put("staleness/max", rec.stalenessMax);
  put("time/rollout_ms", rec.rolloutMs);
  put("time/train_ms", rec.trainMs);
  put("time/eval_ms", rec.evalMs);
  if (rec.heldOut) Object.assign(out, heldOutScalars(rec.heldOut));
  return out;
}

/** The TensorBoard scalars of a held-out score. */
export function heldOutScalars(h: HeldOutFields): Record<string, number> {
  return {
    "heldout/solved": h.solved,
    "heldout/solved_se": h.solvedSe,
    "heldout/version": h.version,
    ...(h.diff !== null && h.diffSe !== null ? { "heldout/diff": h.diff, "heldout/diff_se": h.diffSe } : {}),
  };
}

/**
 * A run's metrics in `dir`: `metrics.jsonl`, created empty (a rerun into the same folder starts a new
 * log), and a TensorBoard event file in `dir/tensorboard/`. A resumed run (`keepThrough`: the iterations it
 * has done) keeps the lines of those iterations and drops any later one (a step a kill left unrecorded).
 */
export class MetricsLog {
  readonly path: string;
  readonly tensorboard: TensorBoardWriter;

  constructor(
    dir: string,
    private readonly clock: Clock,
    /** Further sinks of every line's scalars (e.g. MLflow), fed as the TensorBoard file is. */
    private readonly sinks: readonly MetricsSink[] = [],
    keepThrough?: number,
  ) {
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, "metrics.jsonl");
    // A line cut by the kill is dropped with the steps after `keepThrough`.
    const kept = keepThrough === undefined || !existsSync(this.path) ? [] : parseMetricsLines(readFileSync(this.path, "utf8")).filter((l) => (numberField(l.fields, "index") ?? Infinity) <= keepThrough);
    writeFileSync(this.path, kept.map((l) => `${l.text}\n`).join(""));
    this.tensorboard = new TensorBoardWriter(join(dir, "tensorboard"), clock);
  }

  /** Append `r`'s line and scalars now (synchronously: on disk when the step's report is printed). */
  append(r: IterationResult, kind: MetricsRecord["kind"]): MetricsRecord {
    return this.appendRecord(metricsRecord(r, kind, this.clock.now()));
  }

  /** Append a line made before (a resumed run's iteration whose report a kill cut) and its scalars. */
  appendRecord(rec: MetricsRecord): MetricsRecord {
    appendFileSync(this.path, `${JSON.stringify(rec)}\n`);
    const scalars = tensorboardScalars(rec);
    this.tensorboard.scalars(rec.index, scalars);
    for (const s of this.sinks) s.log(rec.index, scalars, rec.time);
    return rec;
  }

  /** Append the starting policy's held-out score as its own line (index 0) and scalars at step 0. */
  appendHeldOut(score: HeldOutScore): HeldOutRecord {
    const rec: HeldOutRecord = { kind: "held-out", index: 0, time: this.clock.now(), policyVersion: score.version, heldOut: heldOutFields(score) };
    appendFileSync(this.path, `${JSON.stringify(rec)}\n`);
    const scalars = heldOutScalars(rec.heldOut);
    this.tensorboard.scalars(0, scalars);
    for (const s of this.sinks) s.log(0, scalars, rec.time);
    return rec;
  }
}
