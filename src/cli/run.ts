// `arbor run <config>`: wires synchronous rollout iterations end to end — policy, engines,
// gateway, sandboxes, agents, rewards, store and batch export — and, with `train`, the RL loop between
// them (batch → reference-trainer step → checkpoint → weight sync; with train.trainer: external the batch goes
// to a trainer in another process over the trainer protocol, external-trainer.ts); prints a line per iteration and a summary.
// With rollout.mode: async the iterations are the async orchestrator's trainer steps (async-run.ts).
import { setMaxListeners } from "node:events";
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import cliProgress from "cli-progress";
import { isTokenBackend, type Backend, type BackendReply, type GenerateRequest } from "../backends/backend.js";
import { createBackend } from "../backends/registry.js";
import { buildSamples } from "../batch/samples.js";
import { writeSamplesJsonl } from "../batch/export-jsonl.js";
import { loadRunConfig, type BackendConfig, type RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createEnvironment } from "../envs/registry.js";
import { createContextPolicy } from "../agents/context/registry.js";
import { createGateway } from "../gateway/server.js";
import { ensurePolicy } from "../model/policy.js";
import { createRewardFromConfig } from "../reward/registry.js";
import { GroupRewarder } from "../reward/group-rewarder.js";
import { agentSpecOf } from "../rollout/blackbox-program.js";
import { runSyncRollout, type ProgramResult } from "../rollout/sync-rollout.js";
import { bwrapAvailable } from "../sandbox/bwrap.js";
import { createSandboxPool, type SandboxPool } from "../sandbox/pool.js";
import { createSandboxProvider } from "../sandbox/registry.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { createStore } from "../store/registry.js";
import type { RunStats, TrajectoryStore } from "../store/trajectory-store.js";
import { rlUpdate, type RlUpdate } from "../sft/rl-update.js";
import type { Trainer } from "../trainer/trainer.js";
import { runAsyncIterations, type AsyncRunOutcome } from "./async-run.js";
import { startExternalTrainer, type ExternalTrainer } from "./external-trainer.js";
import { iterationLine, meanRewardComponents, summaryTrainingRows, writeRewardPlot } from "./iteration-report.js";
import { loadWeightsEverywhere } from "../rollout/async-rollout-weights.js";

export interface RunSummary {
  runId: string;
  stats: RunStats;
  storePath: string;
  batchPath: string;
  samples: number;
  toolCalls: number;
  /** Prompt tokens looked up / found in the engines' prefix caches (scheduled engines only). */
  prefixCache?: { queries: number; hits: number; preemptions: number };
  elapsedMs: number;
  /** Output tokens per second of rollout wall time. */
  tokensPerSecond: number;
  /** Every iteration in order (one without `iterations`); the fields above describe the last one. */
  iterations: IterationResult[];
  /** SVG of mean reward per iteration (training runs). */
  rewardPlot?: string;
  /** Policy version the engines serve at the end (training runs). */
  policyVersion?: number;
  /** The version each in-process engine serves at the end, in cfg.engines order. */
  engineVersions: number[];
}

/** One rollout iteration and the policy update that followed it. */
export interface IterationResult {
  iteration: number;
  runId: string;
  stats: RunStats;
  /** Mean of each reward component over the iteration's rewarded programs (e.g. outcome, process). */
  rewardComponents?: Record<string, number>;
  batchPath: string;
  samples: number;
  toolCalls: number;
  rolloutMs: number;
  trainMs: number;
  /** Policy version the engines served during this iteration's rollout. */
  policyVersion: number;
  update?: RlUpdate;
  /** Async mode: the batch's token staleness (trainer version − token version) and its tokens' versions. */
  staleness?: { mean: number; max: number; versions: number[] };
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
}

/** CLI entry: load the config, run, print the summary. */
export async function runCommand(configPath: string, opts: RunOptions): Promise<void> {
  const cfg = loadRunConfig(configPath);
  const summary = await runIteration(cfg, { ...opts, log: (line) => console.error(line) });
  printSummary(summary);
}

/**
 * Run the rollout iterations described by `cfg` (one unless `iterations` says more), training after each
 * when `cfg.train` is set. Everything it starts (engines, gateway, sandboxes, store, trainer) is stopped
 * before it returns or throws; on SIGINT/SIGTERM running programs end as `aborted`.
 */
export async function runIteration(cfg: RunConfig, opts: RunOptions): Promise<RunSummary> {
  const clock = realClock;
  const started = clock.now();
  if (cfg.sandbox.provider === "bwrap") {
    const bw = bwrapAvailable();
    if (!bw.ok) throw new ArborError(bw.message, "sandbox");
  }
  const outDir = resolve(cfg.output.dir);
  mkdirSync(outDir, { recursive: true });
  const env = createEnvironment(cfg.env.name, cfg.env.hygiene ? { hygiene: cfg.env.hygiene } : {});
  // A bad context-policy config fails here, before anything starts.
  if (cfg.agent.context !== undefined) createContextPolicy(cfg.agent.context);
  const agent = agentSpecOf(cfg.agent);
  if (cfg.rollout.mode === "async" && cfg.train === undefined) {
    // Checked before anything starts: async batches exist only for a trainer to take them.
    throw new ArborError("rollout.mode: 'async' needs `train` (its trainer takes the batches); add train or use mode: sync", "config");
  }
  const reward = createRewardFromConfig(cfg.reward);
  const rewarder = new GroupRewarder(reward);
  const adminToken = gatewayAdminToken(cfg);

  const engines: ListeningEngineServer[] = [];
  let store: TrajectoryStore | undefined;
  let sandboxes: SandboxProvider | undefined;
  let pool: SandboxPool | undefined;
  let gateway: ReturnType<typeof createGateway> | undefined;
  let trainer: Trainer | undefined;
  /** train.trainer: external: the trainer protocol server a trainer in another process trains through. */
  let external: ExternalTrainer | undefined;
  const abort = new AbortController();
  // Every program's client listens on this one signal.
  setMaxListeners(0, abort.signal);
  const onSignal = (sig: NodeJS.Signals): void => abort.abort(new Error(`received ${sig}`));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const log = opts.log ?? (() => {});
    let modelPath = cfg.model.path;
    if (modelPath === undefined) {
      const policy = ensurePolicy(resolve(".arbor/models"), cfg.model.init);
      modelPath = policy.path;
      log(`policy   ${policy.path} (${policy.created ? "created" : "cached"}, seed ${cfg.model.init.seed})`);
    }
    for (const [i, e] of cfg.engines.entries()) {
      engines.push(
        await startEngineServer({
          name: e.name,
          modelPath,
          policyVersion: 0,
          sequences: e.sequences,
          contextSize: e.contextSize,
          maxWaiting: e.maxWaiting,
          host: "127.0.0.1",
          port: e.port,
          seed: cfg.seed + i,
          inFlightOnWeightSwitch: e.inFlightOnWeightSwitch,
          executorKind: e.executor,
          costProfile: e.costProfile,
          clock,
        }),
      );
    }
    engines.forEach((e, i) => log(`engine   ${e.url} (${cfg.engines[i]?.executor}, policy version 0)`));
    const backendCfgs: BackendConfig[] =
      cfg.backends.length > 0 ? cfg.backends : cfg.engines.map((e) => ({ name: e.name, type: "builtin" }));
    const backends = backendCfgs.map((b) => {
      const local = engines.find((e, i) => cfg.engines[i]?.name === b.name);
      const backend = createBackend(b, local && !b.url ? { url: `${local.url}/v1` } : {});
      return opts.onBackendReply ? tapBackend(backend, opts.onBackendReply) : backend;
    });

    const storePath = join(outDir, "store.sqlite");
    store = createStore({ kind: "sqlite", path: storePath });
    const { recovered } = store;
    if (recovered.runs.length > 0) {
      log(`store    ended ${recovered.programs.length} program(s) of ${recovered.runs.length} run(s) left unfinished by a killed process, as aborted`);
    }
    const traces = store;
    gateway = createGateway({
      backends,
      // The gateway owns the programs: it creates and ends their rows and records their calls.
      store,
      // GET /programs/:id/trace reads the program's calls back from the store.
      traceSource: { callsOf: async (id) => (await traces.getTrajectory(id))?.calls ?? [] },
      clock,
      routing: cfg.gateway.routing,
      callTimeoutMs: cfg.gateway.callTimeoutMs,
      health: cfg.gateway.health,
      onProgramTerminated: async (id) => {
        await pool?.reclaim(id);
      },
      ...(cfg.gateway.pausing.enabled ? { pausing: cfg.gateway.pausing } : {}),
      ...(cfg.gateway.dividedRollout ? { dividedRollout: cfg.gateway.dividedRollout } : {}),
      ...(adminToken && cfg.gateway.auth ? { auth: { adminToken, requireProgramKeys: cfg.gateway.auth.requireProgramKeys } } : {}),
      ...(cfg.gateway.limits ? { limits: cfg.gateway.limits } : {}),
    });
    await gateway.checkBackends();
    const gatewayUrl = await gateway.listen(cfg.gateway.host, cfg.gateway.port);
    const routing = typeof cfg.gateway.routing === "string" ? cfg.gateway.routing : "custom routing";
    log(`gateway  ${gatewayUrl} (${routing} over ${backends.map((b) => b.name).join(", ")})`);

    const shared = { maxProcesses: cfg.sandbox.maxProcesses, workspaceMb: cfg.sandbox.workspaceMb };
    sandboxes = createSandboxProvider(cfg.sandbox.provider, {
      root: cfg.sandbox.root,
      limits: { cpuSeconds: cfg.sandbox.cpuSeconds, memoryMb: cfg.sandbox.memoryMb, wallMs: cfg.sandbox.wallMs },
      clock,
      bwrap: shared,
      docker: { ...shared, image: cfg.sandbox.docker.image, cpus: cfg.sandbox.docker.cpus },
      k8s: { workspaceMb: cfg.sandbox.workspaceMb, namespace: cfg.sandbox.k8s.namespace, image: cfg.sandbox.k8s.image, cpus: cfg.sandbox.k8s.cpus },
    });
    const swept = (sandboxes as { sweptOnStart?: string[] }).sweptOnStart ?? [];
    if (swept.length > 0) log(`sandbox  removed ${swept.length} workspace(s) left behind by killed runs`);
    // Hook-based GC (ThunderAgent §B2): a program's sandbox is reclaimed as soon as the gateway ends
    // the program, whatever the cause; the leak check catches any sandbox whose program is gone.
    const livePrograms = gateway;
    pool = createSandboxPool({
      provider: sandboxes,
      clock,
      warmSize: cfg.sandbox.poolSize,
      registry: gateway.metrics.registry,
      livePrograms: () => livePrograms.table.list().filter((p) => p.state === "active").map((p) => p.id),
      leakCheckMs: cfg.sandbox.leakCheckMs,
      log: (line) => log(`sandbox  ${line}`),
    });
    // Asynchronous preparation: the first programs find warm sandboxes; each program that ends
    // starts the preparation of one more, for the program that will take its place.
    if (cfg.sandbox.poolSize > 0) pool.prepare(cfg.sandbox.poolSize);

    const baseRunId = opts.runId ?? `${cfg.name}-${new Date(started).toISOString().replace(/[:.]/g, "-")}`;
    // Each iteration rolls out its own slice of tasks (fresh prompts); iteration 1's are env.tasks(n, seed).
    const allTasks = env.tasks(cfg.env.tasks * cfg.iterations, cfg.env.seed);
    const checkpointDir = join(outDir, "checkpoints");
    if (cfg.train?.external) {
      const synced = engines.map((e, i) => ({ name: cfg.engines[i]?.name ?? `engine-${i}`, url: e.url }));
      external = await startExternalTrainer({ config: cfg.train.external, engines: synced, estimator: cfg.train.estimator, estimatorOptions: cfg.train.estimatorOptions, modelPath, clock, signal: abort.signal });
      log(`trainer  ${external.url} (external: waiting for a trainer)`);
    } else if (cfg.train) {
      // Versions restart at 1 in a new run; the previous run's checkpoints would look newer.
      rmSync(checkpointDir, { recursive: true, force: true });
      const { Trainer } = await import("../trainer/trainer.js");
      trainer = await Trainer.fromGguf(modelPath, { lr: cfg.train.lr, maxGradNorm: cfg.train.maxGradNorm, version: 0, clock });
    }
    const results: IterationResult[] = [];
    /** Async mode: the whole run, which the summary describes instead of the last step's batch. */
    let asyncRun: AsyncRunOutcome | undefined;
    if (cfg.rollout.mode === "async" && trainer) {
      await store.createRun({ id: baseRunId, name: cfg.name, configJson: JSON.stringify(cfg), startedAt: started });
      asyncRun = await runAsyncIterations({
        cfg,
        runId: baseRunId,
        env,
        tasks: allTasks,
        store,
        sandboxes: pool.asProvider(),
        gatewayUrl,
        ...(adminToken ? { gatewayAdminToken: adminToken } : {}),
        rewarder,
        agent,
        engineUrls: engines.map((e) => e.url),
        trainer,
        checkpointDir,
        outDir,
        clock,
        signal: abort.signal,
        ...(opts.onProgramDone ? { onProgramDone: opts.onProgramDone } : {}),
        log,
      });
      results.push(...asyncRun.iterations);
      if (results.length === 0) throw new ArborError(`async rollout ended before its first trainer step; programs recorded in ${storePath}`, "aborted");
    }
    for (let iteration = 1; asyncRun === undefined && iteration <= cfg.iterations; iteration++) {
      const runId = cfg.iterations === 1 ? baseRunId : `${baseRunId}-it${iteration}`;
      const version = trainer?.version ?? external?.version ?? 0;
      await store.createRun({ id: runId, name: cfg.name, configJson: JSON.stringify(cfg), startedAt: iteration === 1 ? started : clock.now() });
      const tasks = allTasks.slice((iteration - 1) * cfg.env.tasks, iteration * cfg.env.tasks);
      const total = tasks.length * cfg.rollout.groupSize;
      const bar = opts.progress
        ? new cliProgress.SingleBar(
            { format: `rollout${cfg.iterations > 1 ? ` ${iteration}/${cfg.iterations}` : ""} [{bar}] {value}/{total} programs | mean reward {reward} | {duration}s`, hideCursor: true, stream: process.stderr },
            cliProgress.Presets.shades_classic,
          )
        : undefined;
      bar?.start(total, 0, { reward: "-" });
      let rewardSum = 0;
      let done = 0;
      const rolloutStart = clock.now();
      try {
        await runSyncRollout({
          runId,
          env,
          tasks,
          groupSize: cfg.rollout.groupSize,
          concurrency: cfg.rollout.concurrency,
          store,
          sandboxes: pool.asProvider(),
          gatewayUrl,
          ...(adminToken ? { gatewayAdminToken: adminToken } : {}),
          model: "arbor-tiny",
          limits: cfg.agent,
          temperature: cfg.agent.temperature,
          // Rewards relative to the group (completion time) wait for the group's last program.
          reward: (group, ctx) => rewarder.add(group, ctx),
          ...(cfg.agent.context !== undefined ? { context: cfg.agent.context } : {}),
          agent,
          seed: cfg.seed,
          clock,
          signal: abort.signal,
          onProgramDone: (p) => {
            done++;
            if (cfg.sandbox.poolSize > 0 && done + cfg.sandbox.poolSize < total) pool?.prepare(1);
            rewardSum += p.reward.total;
            bar?.update(done, { reward: (rewardSum / done).toFixed(3) });
            opts.onProgramDone?.(p);
          },
        });
      } finally {
        bar?.stop();
      }
      const rolloutMs = Math.max(1, clock.now() - rolloutStart);
      await store.finishRun(runId, clock.now());
      if (abort.signal.aborted) throw new ArborError(`run aborted (${String((abort.signal.reason as Error).message)}); programs recorded as aborted in ${storePath}`, "aborted");

      const trajectories = await store.listTrajectories(runId);
      const groups = await store.listGroups(runId);
      const samples = buildSamples(trajectories, groups);
      const batchPath = join(outDir, cfg.iterations === 1 ? "batch.jsonl" : `batch-it${iteration}.jsonl`);
      await writeSamplesJsonl(batchPath, samples);
      const stats = await store.stats(runId);
      const toolCalls = trajectories.reduce((n, t) => n + t.tools.length, 0);
      const trainStart = clock.now();
      const update =
        trainer && cfg.train
          ? rlUpdate(trainer, {
              id: runId,
              trajectories,
              groups,
              estimator: cfg.train.estimator,
              estimatorOptions: cfg.train.estimatorOptions,
              checkpointDir,
              keepCheckpoints: cfg.train.keepCheckpoints,
            })
          : external
            ? await external.train({ id: runId, trajectories, groups })
            : undefined;
      // An external trainer's weights were loaded when it announced them (before its ack).
      if (update?.checkpoint !== undefined && !external) {
        const synced = engines.map((e, i) => ({ name: cfg.engines[i]?.name ?? `engine-${i}`, url: e.url }));
        await loadWeightsEverywhere(synced, update.checkpoint, update.version, "finish");
      }
      const result: IterationResult = {
        iteration,
        runId,
        stats,
        rewardComponents: meanRewardComponents(trajectories),
        batchPath,
        samples: samples.length,
        toolCalls,
        rolloutMs,
        trainMs: clock.now() - trainStart,
        policyVersion: version,
        ...(update ? { update } : {}),
      };
      results.push(result);
      if (cfg.train || cfg.iterations > 1) log(iterationLine(result, cfg.iterations));
    }
    const last = results[results.length - 1] as IterationResult;
    const rewardPlot = cfg.train ? writeRewardPlot(outDir, results) : undefined;
    // Before the engines close: their executors' cache counters (scheduled executors only).
    const engineStats = engines.map((e) => e.executor.stats());
    const queries = engineStats.reduce((n, x) => n + (x.prefixCacheQueries ?? 0), 0);
    const hits = engineStats.reduce((n, x) => n + (x.prefixCacheHits ?? 0), 0);
    return {
      runId: last.runId,
      stats: asyncRun?.stats ?? last.stats,
      storePath,
      batchPath: last.batchPath,
      samples: last.samples,
      toolCalls: asyncRun?.toolCalls ?? last.toolCalls,
      prefixCache: queries > 0 ? { queries, hits, preemptions: engineStats.reduce((n, x) => n + (x.preemptions ?? 0), 0) } : undefined,
      elapsedMs: clock.now() - started,
      tokensPerSecond: asyncRun ? (asyncRun.stats.outputTokens * 1000) / asyncRun.rolloutMs : (last.stats.outputTokens * 1000) / last.rolloutMs,
      iterations: results,
      ...(rewardPlot ? { rewardPlot } : {}),
      ...(trainer ? { policyVersion: trainer.version } : external ? { policyVersion: external.version } : {}),
      engineVersions: engines.map((e) => e.slot.policyVersion),
    };
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await pool?.close();
    await sandboxes?.destroyAll();
    await gateway?.close();
    await external?.close();
    await Promise.allSettled(engines.map((e) => e.close()));
    await store?.close();
    trainer?.dispose();
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

function tapBackend<B extends Backend>(b: B, tap: (backend: string, reply: BackendReply) => void): B {
  const seen = (reply: BackendReply): BackendReply => {
    tap(b.name, reply);
    return reply;
  };
  // Everything else (metrics, pause/restore, tokenize) is inherited from the adapter.
  return Object.assign(Object.create(b) as B, {
    chatCompletions: async (body: object, signal?: AbortSignal) => seen(await b.chatCompletions(body, signal)),
    completions: async (body: object, signal?: AbortSignal) => seen(await b.completions(body, signal)),
    // The gateway's token path: the engine's answer to a token-id prompt, in the shape the tap reads.
    ...(isTokenBackend(b)
      ? {
          generate: async (req: GenerateRequest) => {
            const r = await b.generate(req);
            const choice = { token_ids: r.outputTokenIds, logprobs: { content: r.logprobs.map((logprob) => ({ logprob })) } };
            seen({ status: 200, json: { prompt_token_ids: r.promptTokenIds, choices: [choice], policy_version: r.policyVersion } });
            return r;
          },
        }
      : {}),
  });
}

function printSummary(s: RunSummary): void {
  const t = s.stats;
  const terminations = Object.entries(t.terminations)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  const rows: [string, string][] = [
    ["run", s.runId],
    ["programs", `${t.programs} (${terminations || "none ended"})`],
    ["calls", `${t.calls} model calls, ${s.toolCalls} tool calls`],
    ["tokens", `${t.promptTokens} prompt, ${t.outputTokens} output`],
    ...(s.prefixCache
      ? ([["prefix cache", `${((100 * s.prefixCache.hits) / s.prefixCache.queries).toFixed(1)}% of prompt tokens served from cache, ${s.prefixCache.preemptions} preemptions`]] as [string, string][])
      : []),
    ["mean reward", t.meanReward === null ? "-" : t.meanReward.toFixed(3)],
    ["tokens/s", `${s.tokensPerSecond.toFixed(0)} output tokens/s over the rollout`],
    ["elapsed", `${(s.elapsedMs / 1000).toFixed(1)} s`],
    ["store", s.storePath],
    ["batch", `${s.batchPath} (${s.samples} samples)`],
    ...summaryTrainingRows(s),
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  console.log("\nArbor run summary");
  for (const [k, v] of rows) console.log(`  ${k.padEnd(w)}  ${v}`);
}
