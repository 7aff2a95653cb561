// `arbor run <config>`: reads the config and wires the run — policy, engines, gateway, sandboxes, agents,
// rewards, store, the orchestrated rollout (sync or async), the trainer (in process, or external over the
// trainer protocol) and the engines' weight sync — into the training loop (src/loop/train-loop.ts), which
// runs rollout → rewards → batch → trainer step → weight sync; prints a line per step and a summary.
import { lineLog, processLog } from "../core/logger.js";
import { setMaxListeners } from "node:events";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { loadClusterConfig, loadClusterRunConfig, type ClusterConfig } from "../core/cluster-config.js";
import { loadRunConfig, servedModelOf, type RunConfig } from "../core/config.js";
import { parseOverride } from "../core/config-overrides.js";
import { ArborError, SignalledError } from "../core/errors.js";
import { makeOutputDir } from "../core/output-dir.js";
import { realClock } from "../core/real-clock.js";
import { Rng } from "../core/rng.js";
import { environmentFromConfig, runTasks } from "../envs/from-config.js";
import { nativeTask } from "../envs/native-tools.js";
import { createContextPolicy } from "../agents/context/registry.js";
import type { BackendReply } from "../backends/backend.js";
import { jsonlBatchExporter } from "../loop/export-batch.js";
import { batchStats, type IterationResult } from "../loop/iteration-result.js";
import type { HeldOutScore } from "../loop/held-out-eval.js";
import { runTrainLoop, type TrainLoopResult } from "../loop/train-loop.js";
import type { Trainer } from "../loop/trainer-port.js";
import { fleetWeightSync } from "../loop/fleet-weight-sync.js";
import { loadCustomRewards } from "../reward/custom-reward.js";
import { createRewardFromConfig } from "../reward/registry.js";
import { GroupRewarder } from "../reward/group-rewarder.js";
import { OrchestratedRollout } from "../rollout/async-rollout.js";
import { agentSpecOf } from "../rollout/blackbox-program.js";
import { orchestratorSettings, schedulerFromConfig } from "../rollout/orchestrator/from-config.js";
import type { ProgramResult } from "../rollout/sync-rollout.js";
import { trainingTrajectories } from "../store/held-out-groups.js";
import type { RunStats } from "../store/trajectory-store.js";
import { checkPortsFree, runPorts } from "./check-ports.js";
import { checkAgentModule, checkRunStart } from "./run-checks.js";
import { runEvaluation } from "./run-held-out.js";
import { progressBar } from "./run-progress.js";
import { startTrackingSinks } from "./run-tracking.js";
import { startRunTrainer } from "./run-trainer.js";
import { checkCostProfile, checkModelFile, policyPath } from "./engine-start.js";
import { createRunJudge } from "./run-judge.js";
import { connectCluster, startEmbedded } from "./run-deployment.js";
import { heldOutFields, MetricsLog, metricsRecord, type MetricsRecord } from "../loop/metrics-log.js";
import { adoptTrained, readResumeState, RESUME_FILE, writeResumeState, type ResumeState, type TrainedStep } from "../loop/resume-state.js";
import { engineEndpoints } from "./engine-cache-stats.js";
import { optimizerFileName } from "../trainer/checkpoint.js";
import { checkSameRun, loadResumedRun } from "./run-resume.js";
import { startRunDashboard, type DashboardListen } from "./dashboard/dashboard-command.js";
import { asyncStepLine, earlierPlotPoints, heldOutText, iterationLine, summaryTrainingRows, writeRewardPlot, type EarlierPoints } from "./iteration-report.js";

export type { IterationResult } from "../loop/iteration-result.js";

export interface RunSummary {
  runId: string;
  stats: RunStats;
  /** The SQLite file, or the Postgres store's name (`postgres store <url> (schema <s>)`). */
  storePath: string;
  batchPath: string;
  samples: number;
  toolCalls: number;
  /**
   * Prompt tokens looked up / found in the engines' prefix caches, and preemptions, over the whole run (every
   * iteration and evaluation): scheduled in-process engines, and engines reached by URL that count them on /metrics.
   */
  prefixCache?: { queries: number; hits: number; preemptions: number };
  elapsedMs: number;
  /** Output tokens per second of rollout wall time. */
  tokensPerSecond: number;
  /**
   * The iteration `stats`, `toolCalls`, `samples` and `tokensPerSecond` describe: a sync run's last; absent for an
   * async run, where they describe the whole run.
   */
  statsIteration?: number;
  /** Every iteration (sync) or trainer step (async) of this process, in order. */
  iterations: IterationResult[];
  /** An async run: `iterations` are trainer steps (the summary says `steps`). */
  async?: true;
  /** SVG of mean reward per iteration and the held-out solved rate per version (training runs). */
  rewardPlot?: string;
  /** A resumed run's iterations before this process's, read back from metrics.jsonl (the summary's curves draw them). */
  earlier?: EarlierPoints;
  /** Held-out evaluation (`eval`): each scored version's solved rate, SE and paired difference against version 0. */
  heldOut?: HeldOutScore[];
  /** One JSON line of metrics per iteration (sync) or trainer step (async): `loop/metrics-log.ts`. */
  metricsPath: string;
  /** The TensorBoard event file of the same numbers. */
  tensorboardPath: string;
  /** Policy version the engines serve at the end (training runs). */
  policyVersion?: number;
  /** The version each in-process engine serves at the end, in cfg.engines order. */
  engineVersions: number[];
  /** External engines with weight sync: the version each serves at the end, or why it left the rotation. */
  backendVersions?: { name: string; version: number; retired?: string }[];
}

export interface RunOptions {
  /** Draw a progress bar on stderr. */
  progress: boolean;
  /** Receives one-line status messages (what was started where). */
  log?: (line: string) => void;
  /** Called after each program ends (tests and custom front ends). */
  onProgramDone?: (p: ProgramResult) => void;
  /** Sees every engine reply as the gateway receives it, before the gateway records it (end-to-end checks). */
  onBackendReply?: (backend: string, reply: BackendReply) => void;
  /**
   * Run id (default: name and start time): the prefix of its program ids in the store. Sampling seeds do not
   * depend on it (they come from the config seed, the task and the sample index).
   */
  runId?: string;
  /**
   * Run on the services of this deployment (`--cluster cluster.yaml`): its store, gateway and engines, programs on
   * its workers. The config must come from `loadClusterRunConfig` (the deployment's parts merged in).
   */
  cluster?: ClusterConfig;
  /**
   * Continue the run whose state this is (`--resume <run dir>`): its id, the iterations (or steps) after the
   * done ones, from its checkpoint and optimizer state; the config must be the run's (run-resume.ts).
   */
  resume?: ResumeState;
  /** Serve the dashboard beside the run (`--dashboard [port]`): cli/dashboard/, closed when the run ends. */
  dashboard?: DashboardListen;
}

/**
 * CLI entry: load the config (or, with `resume`, the run's stored one), run, print the summary. With `continue`, the
 * config's run is resumed where its output.dir holds a resume.json (a retried job, a restarted service), else started.
 */
export async function runCommand(configPath: string | undefined, opts: Omit<RunOptions, "cluster" | "resume"> & { cluster?: string; sets?: readonly string[]; resume?: string; continue?: boolean }): Promise<void> {
  const { sets = [], resume, cluster: clusterPath, continue: goOn = false, ...rest } = opts;
  const overrides = sets.map(parseOverride);
  const cluster = clusterPath !== undefined ? loadClusterConfig(clusterPath) : undefined;
  const log = lineLog(processLog("run"));
  if (goOn && resume !== undefined) throw new ArborError("arbor run: give --continue (the config's output.dir) or --resume <run dir>, not both", "config");
  let resumeDir = resume;
  if (resumeDir === undefined) {
    if (configPath === undefined) throw new ArborError(`arbor run: give a config file${goOn ? " with --continue" : ", or --resume <run dir>"}`, "config");
    const cfg = cluster ? loadClusterRunConfig(configPath, cluster, overrides) : loadRunConfig(configPath, overrides);
    if (!goOn || !existsSync(join(resolve(cfg.output.dir), RESUME_FILE))) {
      printSummary(await runIteration(cfg, { ...rest, cluster, log }));
      return;
    }
    // The same command run again after the run ended (a job retried after its last iteration) has nothing to do,
    // unless its config is not the run's any more (anything but iterations changed): that is refused as --resume does.
    const stored = readResumeState(cfg.output.dir);
    const done = stored.completedIterations;
    if (done >= cfg.iterations) {
      checkSameRun(`--continue ${cfg.output.dir}`, stored, { ...cfg, iterations: done });
      log(`continue ${cfg.output.dir}: its run has done all ${done} ${cfg.rollout.mode === "sync" ? "iterations" : "trainer steps"}, nothing to continue (raise iterations, e.g. --set iterations=${done + 1}, to go further)`);
      return;
    }
    log(`continue ${cfg.output.dir} holds a resume.json: resuming that run`);
    resumeDir = cfg.output.dir;
  }
  const { cfg, state } = loadResumedRun(resumeDir, configPath, overrides, cluster);
  printSummary(await runIteration(cfg, { ...rest, ...(cluster ? { cluster } : {}), resume: state, log }));
}

/**
 * Run the rollout iterations described by `cfg` (one unless `iterations` says more), training after each
 * when `cfg.train` is set. Everything it starts (engines, gateway, sandboxes, store, trainer) is stopped
 * before it returns or throws; on SIGINT/SIGTERM running programs end as `aborted`.
 */
export async function runIteration(cfg: RunConfig, opts: RunOptions): Promise<RunSummary> {
  const clock = realClock;
  const started = clock.now();
  const { cluster } = opts;
  // An iteration trained before a kill cut its evaluation counts as done: the run evaluates and reports it first. (The
  // run's last one is done again instead: no step would be left to evaluate and report it beside.)
  const trainedBefore = opts.resume?.trained;
  const adopted = opts.resume !== undefined && trainedBefore !== undefined && trainedBefore.completedIterations < cfg.iterations ? adoptTrained(opts.resume) : undefined;
  const resume = adopted?.state ?? opts.resume;
  checkRunStart(cfg, opts);
  // With a cluster nothing listens here (the trainer protocol is the trainer-api service's).
  if (cluster === undefined) await checkPortsFree(runPorts(cfg));
  const outDir = resolve(cfg.output.dir);
  // The in-process engines load it (a deployment's engines have their own machines and checks).
  if (cluster === undefined && cfg.engines.length > 0 && cfg.model.path !== undefined) checkModelFile(cfg.model.path);
  if (cluster === undefined) cfg.engines.forEach(checkCostProfile);
  // The user's environment module, task file and reward modules load here: a bad one fails before anything starts.
  const env = await environmentFromConfig(cfg.env);
  // With `eval`, the held-out tasks come after the training ones (or at the end of a task file), none sharing a training task's prompt.
  // A resumed run keeps its held-out tasks where it first drew them, whatever its iterations are now (a state file
  // without the entry is a first resume's: its stored config has the iterations the run started with).
  const heldOutAfter = resume === undefined ? cfg.iterations : (resume.heldOutAfter ?? (resume.config as { iterations: number }).iterations);
  const { tasks: trainTasks, heldOut, perIteration: tasksPerIteration, source: taskSource } = await runTasks(env, cfg.env, cfg.iterations, cfg.eval?.tasks ?? 0, heldOutAfter);
  const custom = cfg.reward.custom ? await loadCustomRewards(cfg.reward.custom) : undefined;
  // A bad context-policy config fails here, before anything starts.
  if (cfg.agent.context !== undefined) createContextPolicy(cfg.agent.context);
  const agent = agentSpecOf(cfg.agent);
  await checkAgentModule(cfg, env, opts.log);
  const judge = createRunJudge({ reward: cfg.reward, callsPath: join(outDir, "judge-calls.jsonl"), timeoutMs: cfg.gateway.callTimeoutMs, clock, ...(opts.log ? { log: opts.log } : {}) });
  const reward = createRewardFromConfig(cfg.reward, { ...judge.deps, ...(custom ? { custom } : {}) });
  const rewarder = new GroupRewarder(reward);
  const adminToken = gatewayAdminToken(cfg);
  // Made once the config's own checks passed: a run refused for a bad module or file leaves no empty folder.
  makeOutputDir(outDir, "output.dir");

  /** What the deployment started or opened, closed in reverse order whatever happens. */
  const closers: (() => Promise<void>)[] = [];
  /** The reference trainer in process, or (train.trainer: external) the trainer protocol server another process trains through. */
  let trainer: Trainer | undefined;
  // Set once the run has its result: the MLflow run is marked FINISHED, else FAILED (KILLED on a signal).
  let finished = false;
  const abort = new AbortController();
  // Every program's client listens on this one signal.
  setMaxListeners(0, abort.signal);
  const onSignal = (sig: "SIGINT" | "SIGTERM"): void => abort.abort(new SignalledError(`received ${sig}`, sig));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const log = opts.log ?? (() => {});
    const modelPath = policyPath(cfg.model, log);
    if (cfg.env.module !== undefined || typeof cfg.env.tasks === "string") log(`env      ${env.name}${cfg.env.module !== undefined ? ` (${cfg.env.module})` : ""}: ${taskSource}`);
    const ctx = { cfg, tasksPerIteration, modelPath, outDir, clock, adminToken, log, onClose: (c: () => Promise<void>) => void closers.push(c), ...(opts.onBackendReply ? { onBackendReply: opts.onBackendReply } : {}) };
    const d = cluster ? await connectCluster(ctx, cluster, resume && cfg.train ? { version: resume.policyVersion, checkpoint: resume.checkpoint } : undefined) : await startEmbedded(ctx);
    const { store, storePath } = d;
    await judge.start(d.backends);
    if (opts.dashboard) closers.push(await startRunDashboard({ listen: opts.dashboard, store, outDir, gatewayUrl: d.gatewayUrl, ...(adminToken ? { gatewayAdminToken: adminToken } : {}), engines: engineEndpoints(d.engines, cfg.backends), clock, log }));

    const baseRunId = resume?.runId ?? opts.runId ?? `${cfg.name}-${new Date(started).toISOString().replace(/[:.]/g, "-")}`;
    const sync = cfg.rollout.mode === "sync";
    // Sync: the orchestrator with one iteration of groups at a time, tasks in order (iteration k rolls out the
    // k-th slice of env.tasks(n·iterations, seed)), each group recording its iteration; one store run either way.
    const settings = orchestratorSettings(cfg.rollout, tasksPerIteration);
    // Native tool calls: the system prompt declares no markup (the request's `tools` declare the tools).
    const native = cfg.agent.kind === "white-box" && cfg.agent.toolMode === "native";
    const allTasks = native ? trainTasks.map((t) => nativeTask(env, t)) : trainTasks;
    const heldOutTasks = native ? heldOut.map((t) => nativeTask(env, t)) : heldOut;
    // A resumed run goes on after the iterations done, at the task cursor, in the same store run (reopened); the
    // iteration a kill interrupted is rolled out again from its start under a fresh key (`it{k}-r{n}`, so fresh
    // group ids): the killed attempt's programs stay in the store, ended as aborted, and no batch holds them, so
    // every task slot trains once.
    // An async run keeps every task (the same shuffle) and leaves out the ones its steps trained on, in whatever
    // order its window took them; the groups the kill cut are admitted again under fresh ids (`${run}/r{n}/g{i}`).
    const done = resume?.completedIterations ?? 0;
    const tasks = sync && done > 0 ? allTasks.slice(done * settings.batchGroups) : allTasks;
    const attempt = resume === undefined ? undefined : resume.resumes + 1;
    const iterationOf = (position: number): { iteration: number; key: string; attempt?: number } => {
      const k = done + Math.floor(position / settings.batchGroups) + 1;
      return { iteration: k, key: `it${k}${attempt !== undefined && k === done + 1 ? `-r${attempt}` : ""}`, ...(attempt !== undefined ? { attempt } : {}) };
    };
    const checkpointDir = join(outDir, "checkpoints");
    // resume.json, rewritten after each iteration or step, says what is done.
    const trainedOn = resume?.consumedTasks ?? [];
    const session = d.workers ? { session: d.workers.session } : {};
    // (Written with the adopted iteration still as `trained`, until its report is out.)
    let state: ResumeState = opts.resume
      ? { ...opts.resume, config: cfg, resumes: attempt as number, ...(cfg.eval ? { heldOutAfter } : {}), ...session, updatedAt: clock.now() }
      : {
          format: 1,
          runId: baseRunId,
          config: cfg,
          completedIterations: 0,
          taskCursor: 0,
          ...(sync ? {} : { consumedTasks: [] }),
          policyVersion: 0,
          resumes: 0,
          ...(cfg.eval ? { heldOutAfter } : {}),
          ...(cluster ? { cluster: cluster.name } : {}),
          ...session,
          updatedAt: clock.now(),
        };
    writeResumeState(outDir, state);
    if (resume?.session !== undefined && d.workers) {
      // The killed process's programs still queued or running on the workers would take the engines beside this one's.
      await d.workers.cutEarlier(baseRunId, resume.session, "the run was resumed by another orchestrator process");
      log(`resume   ${baseRunId}: what its earlier orchestrator left on the workers ends as aborted`);
    }
    const fleet = fleetWeightSync({ engines: d.engines, inFlight: cfg.engines[0]?.inFlightOnWeightSwitch ?? "finish", external: d.external, log });
    const weights = d.announce ? d.announce(fleet) : fleet;
    trainer = await startRunTrainer({ cfg, runId: baseRunId, ...(d.trainerApi ? { trainerApi: d.trainerApi } : {}), weights, modelPath, clock, checkpointDir, signal: abort.signal, log, ...(resume ? { resume } : {}) });
    const units = sync ? "iterations" : "trainer steps";
    if (resume?.checkpoint !== undefined && resume.policyVersion > 0) {
      // Engines started from the model file serve the resumed version before any program runs; a deployment's may
      // serve it still (connectCluster checked that they serve it or version 0).
      if (d.startVersion !== resume.policyVersion) await weights.load(resume.checkpoint, resume.policyVersion);
      log(`resume   ${baseRunId}: ${done} of ${cfg.iterations} ${units} done, policy v${resume.policyVersion}${d.startVersion === resume.policyVersion ? " (the engines serve it still)" : ""}`);
    } else if (resume !== undefined) log(`resume   ${baseRunId}: ${done} of ${cfg.iterations} ${units} done`);
    const progress = opts.progress ? progressBar(cfg, settings.batchGroups * cfg.rollout.groupSize) : undefined;
    // How every program runs (the rollout's and the held-out evaluation's alike).
    const programOptions = {
      env,
      store,
      gatewayUrl: d.gatewayUrl,
      ...(adminToken ? { gatewayAdminToken: adminToken } : {}),
      model: servedModelOf(cfg),
      limits: cfg.agent,
      ...(cfg.agent.context !== undefined ? { context: cfg.agent.context } : {}),
      agent,
      seed: cfg.seed,
      clock,
      signal: abort.signal,
    };
    const rollout = new OrchestratedRollout({
      ...programOptions,
      runId: baseRunId,
      ...(sync ? { iterationOf } : {}),
      ...(resume !== undefined ? { reopen: true } : {}),
      ...(resume !== undefined && !sync ? { resumed: { exclude: new Set(trainedOn), attempt: attempt as number, stepsBefore: done } } : {}),
      run: { name: cfg.name, configJson: JSON.stringify(cfg) },
      tasks,
      shuffle: !sync,
      concurrency: cfg.rollout.concurrency,
      programs: d.programs,
      temperature: cfg.agent.temperature,
      // Rewards relative to the group (completion time) wait for the group's last program.
      reward: (group, rctx) => rewarder.add(group, rctx),
      settings,
      scheduler: schedulerFromConfig(cfg.rollout),
      rng: new Rng(cfg.seed).fork("dataset"),
      // A rollout without training records the version the engines serve (a deployment's may serve an earlier run's).
      ...(resume !== undefined && cfg.train ? { baseVersion: resume.policyVersion } : d.startVersion ? { baseVersion: d.startVersion } : {}),
      trackVersions: d.trackVersions,
      engines: d.instances,
      onProgramDone: (p) => {
        d.programDone();
        progress?.program(p.reward.total);
        opts.onProgramDone?.(p);
      },
    });
    const sinks = await startTrackingSinks(cfg, baseRunId, clock, log);
    for (const s of sinks) closers.push(async () => void (await s.finish(abort.signal.aborted ? "KILLED" : finished ? "FINISHED" : "FAILED")));
    const metrics = new MetricsLog(outDir, clock, sinks, resume !== undefined ? done : undefined);
    const held = cfg.eval
      ? runEvaluation({
          cfg: { ...cfg, eval: cfg.eval },
          tasks: heldOutTasks,
          runId: baseRunId,
          runReady: () => rollout.runReady(),
          programs: d.programs,
          options: programOptions,
          store,
          clock,
          metrics,
          log,
          ...(resume !== undefined ? { attempt, ...(resume.heldOut ? { restore: resume.heldOut } : {}) } : {}),
          onBaseScored: (heldOut) => {
            state = { ...state, heldOut, updatedAt: clock.now() };
            writeResumeState(outDir, state);
          },
        })
      : undefined;
    /** What iteration `r` changes in resume.json: the task cursor, the policy version and its checkpoint. */
    const stepFields = (r: IterationResult): Omit<TrainedStep, "record"> => {
      const u = r.update;
      // (An external trainer keeps its optimizer state itself.)
      const ckpt = u?.stepped && u.checkpoint !== undefined ? { checkpoint: u.checkpoint, ...(u.external ? {} : { optimizer: join(checkpointDir, optimizerFileName(u.version)) }) } : {};
      // (Async: this step's batch is the last the rollout took; the next is taken after this call.)
      const consumed = sync ? undefined : [...trainedOn, ...rollout.consumedTasks()];
      const cursor = consumed === undefined ? { taskCursor: r.iteration * settings.batchGroups } : { taskCursor: consumed.length, consumedTasks: consumed };
      return { completedIterations: r.iteration, ...cursor, policyVersion: u?.version ?? state.policyVersion, ...ckpt };
    };
    const kind = sync ? "iteration" : "step";
    /** The adopted iteration's line and state, with its held-out score when one was due. */
    const reportAdopted = (record: MetricsRecord, score: HeldOutScore | undefined, evalMs: number): void => {
      metrics.appendRecord({ ...record, time: clock.now(), ...(score ? { heldOut: heldOutFields(score), evalMs } : {}) });
      const heldOutState = held?.evaluation.state();
      state = { ...adoptTrained(state).state, ...(heldOutState ? { heldOut: heldOutState } : {}), updatedAt: clock.now() };
      writeResumeState(outDir, state);
      log(`resume   ${kind} ${record.index} was trained before the kill cut its report: recorded now${score ? `, ${heldOutText(score)}` : ""}`);
    };
    const unreported = adopted?.unreported;
    if (unreported !== undefined && held === undefined) reportAdopted(unreported, undefined, 0);
    // With `eval`, the adopted iteration's version is scored first, where the starting policy's would be.
    const evaluate =
      held && unreported !== undefined
        ? async (step: number, version: number, last: boolean): Promise<HeldOutScore | undefined> => {
            if (step === 0) {
              const t0 = clock.now();
              reportAdopted(unreported, await held.evaluate(unreported.index, version, false), clock.now() - t0);
            }
            return held.evaluate(step, version, last);
          }
        : held?.evaluate;
    const batchName = (k: number): string => (cfg.iterations === 1 ? "batch.jsonl" : sync ? `batch-it${k}.jsonl` : `batch-step${k}.jsonl`);
    let loop: TrainLoopResult;
    try {
      loop = await runTrainLoop({
        rollout,
        steps: cfg.iterations,
        ...(done > 0 ? { firstStep: done + 1 } : {}),
        estimator: cfg.train?.estimator ?? "grpo",
        ...(cfg.train?.estimatorOptions ? { estimatorOptions: cfg.train.estimatorOptions } : {}),
        ...(trainer ? { trainer } : {}),
        weights,
        exportBatch: jsonlBatchExporter(outDir, batchName),
        clock,
        ...(evaluate ? { evaluate } : {}),
        // Recorded as trained before its evaluation: a kill during it leaves the step to report, not to redo.
        onTrained: (r) => {
          const heldOutState = held?.evaluation.state();
          state = { ...state, trained: { ...stepFields(r), record: metricsRecord(r, kind, clock.now()) }, ...(heldOutState ? { heldOut: heldOutState } : {}), updatedAt: clock.now() };
          writeResumeState(outDir, state);
        },
        onStep: (r) => {
          const heldOutState = held?.evaluation.state();
          state = { ...adoptTrained(state).state, ...(heldOutState ? { heldOut: heldOutState } : {}), updatedAt: clock.now() };
          writeResumeState(outDir, state);
          metrics.append(r, kind);
          progress?.step();
          if (!sync) log(asyncStepLine(r, cfg.iterations));
          else if (cfg.train || cfg.iterations > 1) log(iterationLine(r, cfg.iterations));
        },
      });
    } finally {
      progress?.stop();
    }
    const { iterations: results, end } = loop;
    if (end.stoppedBy === "aborted") {
      const reason = abort.signal.reason as Error | undefined;
      const message = `run aborted (${String(reason?.message)}); programs recorded as aborted in ${storePath}`;
      throw reason instanceof SignalledError ? new SignalledError(message, reason.signal) : new ArborError(message, "aborted");
    }
    if (!sync && end.stoppedBy === "drained" && done + results.length < cfg.iterations) log(`async    dataset drained after ${done + results.length} of ${cfg.iterations} trainer steps`);
    if (end.unconsumedGroups.length > 0) log(`async    ${end.unconsumedGroups.length} group(s) admitted but not trained on (cut or left when the run stopped)`);
    const last = results[results.length - 1];
    if (last === undefined) throw new ArborError(`the rollout ended before its first batch; programs recorded in ${storePath}`, "aborted");
    // A resumed run's curve starts with the iterations it did before (metrics.jsonl keeps them).
    const earlier = done > 0 ? earlierPlotPoints(metrics.path, done + 1) : undefined;
    const rewardPlot = cfg.train ? writeRewardPlot(outDir, results, loop.heldOutStart, earlier) : undefined;
    // Async: the summary describes the whole run (every program, consumed by a batch or not), sync the last iteration.
    // Held-out programs share the run's id but are no part of its rollout: left out here.
    const rolledOut = sync ? [] : await trainingTrajectories(store, baseRunId);
    const runStats = sync ? last.stats : batchStats(rolledOut);
    const toolCalls = sync ? last.toolCalls : rolledOut.reduce((n, t) => n + t.tools.filter((x) => !x.tool.startsWith("arbor:")).length, 0);
    // Before the engines close: their executors' cache counters (scheduled executors only).
    const cache = await d.engineStats();
    finished = true;
    return {
      runId: last.runId,
      stats: runStats,
      storePath,
      batchPath: last.batchPath,
      samples: last.samples,
      toolCalls,
      prefixCache: cache.queries > 0 ? cache : undefined,
      elapsedMs: clock.now() - started,
      tokensPerSecond: (runStats.outputTokens * 1000) / (sync ? last.rolloutMs : loop.rolloutMs),
      ...(sync ? { statsIteration: last.iteration } : { async: true as const }),
      iterations: results,
      ...(rewardPlot ? { rewardPlot } : {}),
      ...(earlier ? { earlier } : {}),
      ...(held ? { heldOut: held.evaluation.scores } : {}),
      metricsPath: metrics.path,
      tensorboardPath: metrics.tensorboard.path,
      ...(trainer ? { policyVersion: trainer.version } : {}),
      engineVersions: d.engineVersions(),
      ...(d.external.length > 0 ? { backendVersions: d.external.map((b) => ({ name: b.name, version: b.version, ...(b.retired !== undefined ? { retired: b.retired } : {}) })) } : {}),
    };
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await judge.close();
    await trainer?.close();
    for (const close of closers.reverse()) await close();
  }
}

/** The gateway's admin token from the environment, when `gateway.auth` asks for one. */
function gatewayAdminToken(cfg: RunConfig): string | undefined {
  const auth = cfg.gateway.auth;
  if (!auth) return undefined;
  const token = process.env[auth.adminTokenEnv];
  if (!token || token.length < 16) {
    throw new ArborError(`gateway.auth: set ${auth.adminTokenEnv} to an admin token of at least 16 characters`, "config");
  }
  return token;
}

/** The summary's rows (name, value) as `arbor run` prints them. */
export function summaryRows(s: RunSummary): [string, string][] {
  const t = s.stats;
  const terminations = Object.entries(t.terminations)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  // A sync run of several iterations counts its last one's: said on each such row, so that it is not read as the run's.
  const of = s.statsIteration !== undefined && s.statsIteration > 1 ? ` in iteration ${s.statsIteration}` : "";
  return [
    ["run", s.runId],
    ["programs", `${t.programs}${of} (${terminations || "none ended"})`],
    ["calls", `${t.calls} model calls, ${s.toolCalls} tool calls${of}`],
    ["tokens", `${t.promptTokens} prompt, ${t.outputTokens} output${of}`],
    ...(s.prefixCache
      ? ([["prefix cache", `${((100 * s.prefixCache.hits) / s.prefixCache.queries).toFixed(1)}% of prompt tokens served from cache, ${s.prefixCache.preemptions} preemptions over the run`]] as [string, string][])
      : []),
    ["mean reward", `${t.meanReward === null ? "-" : t.meanReward.toFixed(3)}${of}`],
    ["tokens/s", `${s.tokensPerSecond.toFixed(0)} output tokens/s over the rollout${of}`],
    ["elapsed", `${(s.elapsedMs / 1000).toFixed(1)} s`],
    ["store", s.storePath],
    ["batch", `${s.batchPath} (${s.samples} samples)`],
    ["metrics", `${s.metricsPath}, ${dirname(s.tensorboardPath)} (TensorBoard)`],
    ...summaryTrainingRows(s),
  ];
}

function printSummary(s: RunSummary): void {
  const rows = summaryRows(s);
  const w = Math.max(...rows.map(([k]) => k.length));
  console.log("\nArbor run summary");
  for (const [k, v] of rows) console.log(`  ${k.padEnd(w)}  ${v}`);
}
