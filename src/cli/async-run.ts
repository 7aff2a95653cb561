// `arbor run` with rollout.mode: async — drives runAsyncRollout on the stack run.ts started (engines,
// gateway, store, sandbox pool) with the reference trainer as its trainer: each batch the orchestrator
// hands over becomes one rlUpdate, its checkpoint is loaded on every engine, and the step is reported
// as an IterationResult so the sync mode's line, plot and summary describe it too.
import { join } from "node:path";
import { buildSamples } from "../batch/samples.js";
import { writeSamplesJsonl } from "../batch/export-jsonl.js";
import type { RunConfig } from "../core/config.js";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import type { Trajectory } from "../core/types.js";
import type { Environment, Task } from "../envs/env.js";
import type { GroupRewarder } from "../reward/group-rewarder.js";
import { runAsyncRollout, type AsyncTrainerBatch, type PublishedPolicy } from "../rollout/async-rollout.js";
import type { AgentSpec } from "../rollout/blackbox-program.js";
import { orchestratorSettings, schedulerFromConfig } from "../rollout/orchestrator/from-config.js";
import type { ProgramResult } from "../rollout/sync-rollout.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { rlUpdate } from "../sft/rl-update.js";
import { TERMINATION_KINDS, type RunStats, type TrajectoryStore } from "../store/trajectory-store.js";
import type { Trainer } from "../trainer/trainer.js";
import { iterationLine, meanRewardComponents } from "./iteration-report.js";
import type { IterationResult } from "./run.js";

/** What run.ts has started and decided before the rollout. */
export interface AsyncRunContext {
  cfg: RunConfig;
  runId: string;
  env: Environment;
  /** The whole dataset: every iteration's tasks. */
  tasks: Task[];
  store: TrajectoryStore;
  sandboxes: SandboxProvider;
  gatewayUrl: string;
  gatewayAdminToken?: string;
  rewarder: GroupRewarder;
  agent: AgentSpec;
  /** The in-process engines' server roots, in cfg.engines order. */
  engineUrls: readonly string[];
  trainer: Trainer;
  checkpointDir: string;
  outDir: string;
  clock: Clock;
  signal: AbortSignal;
  onProgramDone?: (p: ProgramResult) => void;
  log: (line: string) => void;
}

export interface AsyncRunOutcome {
  /** One per trainer step, in order. */
  iterations: IterationResult[];
  /** The whole run: every program, consumed by a batch or not. */
  stats: RunStats;
  /** Wall time of the rollout, ms (for tokens/s). */
  rolloutMs: number;
  batchPath: string;
  samples: number;
  toolCalls: number;
}

/**
 * Run the asynchronous rollout with a reference-trainer step per batch (at most cfg.iterations steps).
 * The store run `ctx.runId` must exist; it is finished here. Throws when aborted or when a step has no
 * signal (the orchestrator needs a new policy version per batch).
 */
export async function runAsyncIterations(ctx: AsyncRunContext): Promise<AsyncRunOutcome> {
  const { cfg, store, clock } = ctx;
  const train = cfg.train;
  if (train === undefined) throw new ArborError("rollout.mode: 'async' needs `train` (its trainer takes the batches); add train or use mode: sync", "config");
  // One iteration's tasks per batch unless batchGroups says otherwise; the whole dataset would be one step.
  const settings = orchestratorSettings(cfg.rollout, cfg.env.tasks);
  const iterations: IterationResult[] = [];
  const started = clock.now();
  let stepStart = started;
  const out = await runAsyncRollout({
    runId: ctx.runId,
    env: ctx.env,
    tasks: ctx.tasks,
    concurrency: cfg.rollout.concurrency,
    store,
    sandboxes: ctx.sandboxes,
    gatewayUrl: ctx.gatewayUrl,
    ...(ctx.gatewayAdminToken ? { gatewayAdminToken: ctx.gatewayAdminToken } : {}),
    model: "arbor-tiny",
    limits: cfg.agent,
    temperature: cfg.agent.temperature,
    reward: (group, rctx) => ctx.rewarder.add(group, rctx),
    ...(cfg.agent.context !== undefined ? { context: cfg.agent.context } : {}),
    agent: ctx.agent,
    seed: cfg.seed,
    clock,
    signal: ctx.signal,
    settings,
    scheduler: schedulerFromConfig(cfg.rollout),
    rng: new Rng(cfg.seed).fork("dataset"),
    engines: cfg.engines.map((e, i) => ({
      name: e.name,
      url: ctx.engineUrls[i] as string,
      maxActive: e.sequences,
      kvCapacityTokens: e.sequences * e.contextSize,
      inFlight: e.inFlightOnWeightSwitch,
    })),
    inFlight: cfg.engines[0]?.inFlightOnWeightSwitch ?? "finish",
    maxTrainerSteps: cfg.iterations,
    onProgramDone: (p) => ctx.onProgramDone?.(p),
    trainer: async (b: AsyncTrainerBatch): Promise<PublishedPolicy | null> => {
      const step = iterations.length + 1;
      const trainStart = clock.now();
      const update = rlUpdate(ctx.trainer, {
        id: `${ctx.runId}-step${step}`,
        trajectories: b.trajectories,
        groups: b.groups,
        estimator: train.estimator,
        estimatorOptions: train.estimatorOptions,
        checkpointDir: ctx.checkpointDir,
        keepCheckpoints: train.keepCheckpoints,
      });
      const batchPath = join(ctx.outDir, cfg.iterations === 1 ? "batch.jsonl" : `batch-step${step}.jsonl`);
      const samples = buildSamples(b.trajectories, b.groups);
      await writeSamplesJsonl(batchPath, samples);
      const now = clock.now();
      const result: IterationResult = {
        iteration: step,
        runId: ctx.runId,
        stats: batchStats(b.trajectories),
        rewardComponents: meanRewardComponents(b.trajectories),
        batchPath,
        samples: samples.length,
        toolCalls: b.trajectories.reduce((n, t) => n + t.tools.length, 0),
        rolloutMs: Math.max(1, trainStart - stepStart),
        trainMs: now - trainStart,
        policyVersion: b.batch.version,
        update,
        staleness: { mean: b.batch.meanStaleness, max: b.batch.maxStaleness, versions: tokenVersions(b) },
      };
      stepStart = now;
      iterations.push(result);
      ctx.log(asyncStepLine(result, cfg.iterations));
      // A batch with no signal (every advantage 0) takes no step: nothing new to publish.
      return update.stepped && update.checkpoint !== undefined ? { modelPath: update.checkpoint, version: update.version } : null;
    },
  });
  const rolloutMs = Math.max(1, clock.now() - started);
  await store.finishRun(ctx.runId, clock.now());
  if (out.stoppedBy === "aborted") {
    throw new ArborError(`run aborted (${String((ctx.signal.reason as Error | undefined)?.message)}); programs recorded as aborted in the store`, "aborted");
  }
  if (out.stoppedBy === "drained" && iterations.length < cfg.iterations) {
    ctx.log(`async    dataset drained after ${iterations.length} of ${cfg.iterations} trainer steps`);
  }
  if (out.unconsumedGroups.length > 0) ctx.log(`async    ${out.unconsumedGroups.length} group(s) admitted but not trained on (cut or left when the run stopped)`);
  const last = iterations[iterations.length - 1];
  const trajectories = await store.listTrajectories(ctx.runId);
  return {
    iterations,
    stats: await store.stats(ctx.runId),
    rolloutMs,
    batchPath: last?.batchPath ?? "",
    samples: last?.samples ?? 0,
    toolCalls: trajectories.reduce((n, t) => n + t.tools.length, 0),
  };
}

/** The sync mode's iteration line with the batch's staleness and the versions its tokens came from. */
export function asyncStepLine(r: IterationResult, of: number): string {
  const s = r.staleness;
  const line = iterationLine(r, of).replace(/^iteration/, "step");
  return s === undefined ? line : `${line}  staleness mean ${s.mean.toFixed(2)} max ${s.max}  token versions ${s.versions.map((v) => `v${v}`).join(",")}`;
}

/** RunStats of a batch's trajectories (the store's are per run; a step's line describes its batch). */
export function batchStats(ts: readonly Trajectory[]): RunStats {
  const terminations = Object.fromEntries(TERMINATION_KINDS.map((k) => [k, 0])) as RunStats["terminations"];
  let unfinished = 0;
  for (const t of ts) {
    const k = t.program.termination?.kind;
    if (k === undefined) unfinished++;
    else terminations[k]++;
  }
  const rewarded = ts.filter((t) => t.reward !== undefined);
  const calls = ts.flatMap((t) => t.calls);
  return {
    programs: ts.length,
    unfinished,
    calls: calls.length,
    promptTokens: calls.reduce((n, c) => n + c.promptTokenIds.length, 0),
    outputTokens: calls.reduce((n, c) => n + c.outputTokenIds.length, 0),
    terminations,
    rewarded: rewarded.length,
    meanReward: rewarded.length === 0 ? null : rewarded.reduce((n, t) => n + (t.reward?.total ?? 0), 0) / rewarded.length,
  };
}

function tokenVersions(b: AsyncTrainerBatch): number[] {
  const vs = new Set(b.batch.groups.flatMap((g) => g.trajectories.flatMap((t) => t.versions.map((s) => s.version))));
  return [...vs].sort((x, y) => x - y);
}
