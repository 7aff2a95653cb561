// `arbor run <config>`: reads the config and wires the run — policy, engines, gateway, sandboxes, agents,
// rewards, store, the orchestrated rollout (sync or async), the trainer (in process, or external over the
// trainer protocol) and the engines' weight sync — into the training loop (src/loop/train-loop.ts), which
// runs rollout → rewards → batch → trainer step → weight sync; prints a line per step and a summary.
import { setMaxListeners } from "node:events";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import cliProgress from "cli-progress";
import { isTokenBackend, type Backend, type BackendReply, type GenerateRequest, type TokenBackend } from "../backends/backend.js";
import type { SyncedBackend } from "../backends/weights/synced-backend.js";
import { registerWeightMetrics } from "../backends/weights/weight-metrics.js";
import { createBackend } from "../backends/registry.js";
import { loadRunConfig, servedModelOf, type BackendConfig, type RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { Rng } from "../core/rng.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createEnvironment } from "../envs/registry.js";
import { nativeTask } from "../envs/native-tools.js";
import { createContextPolicy } from "../agents/context/registry.js";
import { createGateway } from "../gateway/server.js";
import { jsonlBatchExporter } from "../loop/export-batch.js";
import { startExternalTrainer, type ExternalTrainer } from "../loop/external-trainer.js";
import type { IterationResult } from "../loop/iteration-result.js";
import { startReferenceTrainer } from "../loop/reference-trainer.js";
import { runTrainLoop, type TrainLoopResult } from "../loop/train-loop.js";
import type { Trainer } from "../loop/trainer-port.js";
import { fleetWeightSync } from "../loop/fleet-weight-sync.js";
import { createRewardFromConfig } from "../reward/registry.js";
import { GroupRewarder } from "../reward/group-rewarder.js";
import { OrchestratedRollout } from "../rollout/async-rollout.js";
import { agentSpecOf } from "../rollout/blackbox-program.js";
import { orchestratorSettings, schedulerFromConfig } from "../rollout/orchestrator/from-config.js";
import type { ProgramResult } from "../rollout/sync-rollout.js";
import { bwrapAvailable } from "../sandbox/bwrap.js";
import { createSandboxPool, type SandboxPool } from "../sandbox/pool.js";
import { createSandboxProvider } from "../sandbox/registry.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { createStore, openStore } from "../store/registry.js";
import type { RunStats, TrajectoryStore } from "../store/trajectory-store.js";
import { checkPortsFree, runPorts } from "./check-ports.js";
import { startExternalEngine } from "./external-engines.js";
import { engineServerOptions, policyPath } from "./engine-start.js";
import { createRunJudge } from "./run-judge.js";
import { asyncStepLine, iterationLine, summaryTrainingRows, writeRewardPlot } from "./iteration-report.js";

export type { IterationResult } from "../loop/iteration-result.js";

export interface RunSummary {
  runId: string;
  stats: RunStats;
  /** The SQLite file, or the Postgres store's name (`postgres store <url> (schema <s>)`). */
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
  await checkPortsFree(runPorts(cfg));
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
  const judge = createRunJudge({ reward: cfg.reward, callsPath: join(outDir, "judge-calls.jsonl"), timeoutMs: cfg.gateway.callTimeoutMs, clock, ...(opts.log ? { log: opts.log } : {}) });
  const reward = createRewardFromConfig(cfg.reward, judge.deps);
  const rewarder = new GroupRewarder(reward);
  const adminToken = gatewayAdminToken(cfg);

  const engines: ListeningEngineServer[] = [];
  /** External engines that switch weights through their own API (backends with weightSync). */
  const external: SyncedBackend[] = [];
  let store: TrajectoryStore | undefined;
  let sandboxes: SandboxProvider | undefined;
  let pool: SandboxPool | undefined;
  let gateway: ReturnType<typeof createGateway> | undefined;
  /** The reference trainer in process, or (train.trainer: external) the trainer protocol server another process trains through. */
  let trainer: Trainer | undefined;
  const abort = new AbortController();
  // Every program's client listens on this one signal.
  setMaxListeners(0, abort.signal);
  const onSignal = (sig: NodeJS.Signals): void => abort.abort(new Error(`received ${sig}`));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const log = opts.log ?? (() => {});
    const modelPath = policyPath(cfg.model, log);
    for (const [i, e] of cfg.engines.entries()) {
      engines.push(await startEngineServer(engineServerOptions(e, { modelPath, host: "127.0.0.1", seed: cfg.seed + i, clock })));
    }
    engines.forEach((e, i) => log(`engine   ${e.url} (${cfg.engines[i]?.executor}, policy version 0)`));
    const backendCfgs: BackendConfig[] =
      cfg.backends.length > 0 ? cfg.backends : cfg.engines.map((e) => ({ name: e.name, type: "builtin" }));
    const tap = (b: TokenBackend): TokenBackend => (opts.onBackendReply ? tapBackend(b, opts.onBackendReply) : b);
    const backends: TokenBackend[] = [];
    for (const b of backendCfgs) {
      if (b.weightSync !== undefined) {
        // An external engine training switches to new weights through its own API (SGLang, vLLM, a managed llama-server).
        // One that fails to load a version leaves the gateway's rotation at once (its health checks then fail too).
        const onRetired = (name: string, reason: string): void => gateway?.health.callFailed(name, reason);
        const synced = await startExternalEngine({ cfg: { ...b, weightSync: b.weightSync }, modelPath, workDir: join(outDir, "engines"), clock, wrap: tap, log, onRetired });
        external.push(synced);
        backends.push(synced.backend);
        continue;
      }
      const local = engines.find((e, i) => cfg.engines[i]?.name === b.name);
      const engineCfg = cfg.engines.find((e) => e.name === b.name);
      // An in-process engine's backend reads answers with the engine's own parsers: the configured
      // ones, else those its model's template implies (the gateway's token path parses the ids itself).
      const parsers = local && !b.url ? { ...local.served.formats, ...pickDefined({ toolParser: engineCfg?.toolParser, reasoningParser: engineCfg?.reasoningParser }) } : {};
      backends.push(tap(createBackend(b, local && !b.url ? { url: `${local.url}/v1`, ...(engineCfg ? { model: engineCfg.servedModelName } : {}), ...parsers } : {})));
    }

    const st = cfg.store;
    store =
      st.kind === "sqlite"
        ? createStore({ kind: "sqlite", path: join(outDir, "store.sqlite") })
        : await openStore({ kind: "postgres", url: st.url as string, ...(st.schema !== undefined ? { schema: st.schema } : {}), ...(st.poolSize !== undefined ? { poolSize: st.poolSize } : {}), ...(st.reconnectMs !== undefined ? { reconnectMs: st.reconnectMs } : {}) });
    // The file of the embedded store, else the networked store's name (its url without a password, and schema).
    const storePath = (store as { label?: string }).label ?? join(outDir, "store.sqlite");
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
    if (external.length > 0) registerWeightMetrics(gateway.metrics.registry, external);
    await gateway.checkBackends();
    const gatewayUrl = await gateway.listen(cfg.gateway.host, cfg.gateway.port);
    const routing = typeof cfg.gateway.routing === "string" ? cfg.gateway.routing : "custom routing";
    log(`gateway  ${gatewayUrl} (${routing} over ${backends.map((b) => b.name).join(", ")})`);
    await judge.start(backends);

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
    const sync = cfg.rollout.mode === "sync";
    // Sync: the orchestrator with one iteration of groups at a time, tasks in order (iteration k rolls out the
    // k-th slice of env.tasks(n·iterations, seed)), each iteration in its own store run; async: one run.
    const settings = orchestratorSettings(cfg.rollout, cfg.env.tasks);
    const drawn = env.tasks(cfg.env.tasks * cfg.iterations, cfg.env.seed);
    // Native tool calls: the system prompt declares no markup (the request's `tools` declare the tools).
    const allTasks = cfg.agent.kind === "white-box" && cfg.agent.toolMode === "native" ? drawn.map((t) => nativeTask(env, t)) : drawn;
    const runOf = (position: number): string => (sync && cfg.iterations > 1 ? `${baseRunId}-it${Math.floor(position / settings.batchGroups) + 1}` : baseRunId);
    const checkpointDir = join(outDir, "checkpoints");
    const synced = cfg.engines.map((e, i) => ({ name: e.name, url: (engines[i] as ListeningEngineServer).url, inFlight: e.inFlightOnWeightSwitch }));
    const weights = fleetWeightSync({ engines: synced, inFlight: cfg.engines[0]?.inFlightOnWeightSwitch ?? "finish", external, log });
    if (cfg.train?.external) {
      trainer = await startExternalTrainer({ config: cfg.train.external, weights, modelPath, clock, signal: abort.signal });
      log(`trainer  ${(trainer as ExternalTrainer).url} (external: waiting for a trainer)`);
    } else if (cfg.train) {
      trainer = await startReferenceTrainer(modelPath, { lr: cfg.train.lr, maxGradNorm: cfg.train.maxGradNorm, clock, checkpointDir, keepCheckpoints: cfg.train.keepCheckpoints });
    }
    const progress = opts.progress ? progressBar(cfg, settings.batchGroups * cfg.rollout.groupSize) : undefined;
    let done = 0;
    const rollout = new OrchestratedRollout({
      runId: baseRunId,
      runOf,
      run: { name: cfg.name, configJson: JSON.stringify(cfg) },
      env,
      tasks: allTasks,
      shuffle: !sync,
      concurrency: cfg.rollout.concurrency,
      store,
      sandboxes: pool.asProvider(),
      gatewayUrl,
      ...(adminToken ? { gatewayAdminToken: adminToken } : {}),
      model: servedModelOf(cfg),
      limits: cfg.agent,
      temperature: cfg.agent.temperature,
      // Rewards relative to the group (completion time) wait for the group's last program.
      reward: (group, rctx) => rewarder.add(group, rctx),
      ...(cfg.agent.context !== undefined ? { context: cfg.agent.context } : {}),
      agent,
      seed: cfg.seed,
      clock,
      signal: abort.signal,
      settings,
      scheduler: schedulerFromConfig(cfg.rollout),
      rng: new Rng(cfg.seed).fork("dataset"),
      // The instances the scheduling policy places programs on: the in-process engines, else (external backends
      // only) one per backend, each taking up to `concurrency` programs with their whole token budget.
      // Backends without weight sync serve versions of their own (and are never synced: no training).
      trackVersions: cfg.engines.length > 0 || external.length > 0,
      engines:
        cfg.engines.length > 0
          ? cfg.engines.map((e) => ({ name: e.name, maxActive: e.sequences, kvCapacityTokens: e.sequences * e.contextSize }))
          : backends.map((b) => ({ name: b.name, maxActive: cfg.rollout.concurrency, kvCapacityTokens: cfg.rollout.concurrency * Math.max(cfg.agent.maxTotalTokens, 1) })),
      onProgramDone: (p) => {
        done++;
        // Each program that ends starts the preparation of one more sandbox, for the program that takes its place.
        if (cfg.sandbox.poolSize > 0 && done + cfg.sandbox.poolSize < allTasks.length * cfg.rollout.groupSize) pool?.prepare(1);
        progress?.program(p.reward.total);
        opts.onProgramDone?.(p);
      },
    });
    const batchName = (k: number): string => (cfg.iterations === 1 ? "batch.jsonl" : sync ? `batch-it${k}.jsonl` : `batch-step${k}.jsonl`);
    let loop: TrainLoopResult;
    try {
      loop = await runTrainLoop({
        rollout,
        steps: cfg.iterations,
        estimator: cfg.train?.estimator ?? "grpo",
        ...(cfg.train?.estimatorOptions ? { estimatorOptions: cfg.train.estimatorOptions } : {}),
        ...(trainer ? { trainer } : {}),
        weights,
        exportBatch: jsonlBatchExporter(outDir, batchName),
        clock,
        onStep: (r) => {
          progress?.step();
          if (!sync) log(asyncStepLine(r, cfg.iterations));
          else if (cfg.train || cfg.iterations > 1) log(iterationLine(r, cfg.iterations));
        },
      });
    } finally {
      progress?.stop();
    }
    const { iterations: results, end } = loop;
    if (end.stoppedBy === "aborted") throw new ArborError(`run aborted (${String((abort.signal.reason as Error | undefined)?.message)}); programs recorded as aborted in ${storePath}`, "aborted");
    if (!sync && end.stoppedBy === "drained" && results.length < cfg.iterations) log(`async    dataset drained after ${results.length} of ${cfg.iterations} trainer steps`);
    if (end.unconsumedGroups.length > 0) log(`async    ${end.unconsumedGroups.length} group(s) admitted but not trained on (cut or left when the run stopped)`);
    const last = results[results.length - 1];
    if (last === undefined) throw new ArborError(`the rollout ended before its first batch; programs recorded in ${storePath}`, "aborted");
    const rewardPlot = cfg.train ? writeRewardPlot(outDir, results) : undefined;
    // Async: the summary describes the whole run (every program, consumed by a batch or not), sync the last iteration.
    const runStats = sync ? last.stats : await store.stats(baseRunId);
    const toolCalls = sync ? last.toolCalls : (await store.listTrajectories(baseRunId)).reduce((n, t) => n + t.tools.length, 0);
    // Before the engines close: their executors' cache counters (scheduled executors only).
    const engineStats = engines.map((e) => e.executor.stats());
    const queries = engineStats.reduce((n, x) => n + (x.prefixCacheQueries ?? 0), 0);
    const hits = engineStats.reduce((n, x) => n + (x.prefixCacheHits ?? 0), 0);
    return {
      runId: last.runId,
      stats: runStats,
      storePath,
      batchPath: last.batchPath,
      samples: last.samples,
      toolCalls,
      prefixCache: queries > 0 ? { queries, hits, preemptions: engineStats.reduce((n, x) => n + (x.preemptions ?? 0), 0) } : undefined,
      elapsedMs: clock.now() - started,
      tokensPerSecond: (runStats.outputTokens * 1000) / (sync ? last.rolloutMs : loop.rolloutMs),
      iterations: results,
      ...(rewardPlot ? { rewardPlot } : {}),
      ...(trainer ? { policyVersion: trainer.version } : {}),
      engineVersions: engines.map((e) => e.slot.policyVersion),
      ...(external.length > 0 ? { backendVersions: external.map((b) => ({ name: b.name, version: b.version, ...(b.retired !== undefined ? { retired: b.retired } : {}) })) } : {}),
    };
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await pool?.close();
    await sandboxes?.destroyAll();
    await gateway?.close();
    await judge.close();
    await trainer?.close();
    await Promise.allSettled([...engines.map((e) => e.close()), ...external.map((b) => b.close())]);
    await store?.close();
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

/** The rollout progress bar on stderr: one bar per step, with the mean reward of the programs ended so far. */
function progressBar(cfg: RunConfig, perStep: number): { program: (reward: number) => void; step: () => void; stop: () => void } {
  let bar: cliProgress.SingleBar | undefined;
  let step = 1;
  let done = 0;
  let rewardSum = 0;
  const label = cfg.rollout.mode === "async" ? "step" : "rollout";
  return {
    program: (reward) => {
      if (bar === undefined) {
        bar = new cliProgress.SingleBar(
          { format: `${label}${cfg.iterations > 1 ? ` ${step}/${cfg.iterations}` : ""} [{bar}] {value}/{total} programs | mean reward {reward} | {duration}s`, hideCursor: true, stream: process.stderr },
          cliProgress.Presets.shades_classic,
        );
        bar.start(perStep, 0, { reward: "-" });
      }
      done++;
      rewardSum += reward;
      bar.update(done, { reward: (rewardSum / done).toFixed(3) });
    },
    step: () => {
      bar?.stop();
      bar = undefined;
      step++;
      done = 0;
      rewardSum = 0;
    },
    stop: () => bar?.stop(),
  };
}

/** The fields of `o` that are set. */
function pickDefined<T extends Record<string, string | undefined>>(o: T): Partial<Record<keyof T, string>> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<Record<keyof T, string>>;
}
