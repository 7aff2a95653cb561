// Where `arbor run` finds the parts a run needs — store, gateway, engines, where programs run — either started
// here (the embedded default: engines, gateway and sandboxes in this process) or, with `--cluster`, the
// services of a deployment file (`arbor serve engine|gateway|worker` on any host, Postgres, NATS): programs go to
// workers over the broker and the orchestrator keeps only the rollout, rewards, batches and the trainer.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { isTokenBackend, type Backend, type BackendReply, type GenerateRequest, type TokenBackend } from "../backends/backend.js";
import { createBackend } from "../backends/registry.js";
import type { SyncedBackend } from "../backends/weights/synced-backend.js";
import { registerWeightMetrics } from "../backends/weights/weight-metrics.js";
import { announcedWeightSync } from "../loop/announced-weight-sync.js";
import { JetStreamEventBus } from "../broker/jetstream-event-bus.js";
import { JetStreamWorkQueue } from "../broker/jetstream-work-queue.js";
import type { Clock } from "../core/clock.js";
import { clusterBroker, clusterGatewayUrl, clusterStreams, type ClusterConfig } from "../core/cluster-config.js";
import type { BackendConfig, RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createGateway } from "../gateway/server.js";
import { startBrokeredTrainer, type BatchWork, type TrainerEvents } from "../loop/brokered-trainer.js";
import type { Trainer, TrainerStart, WeightSync } from "../loop/trainer-port.js";
import type { SyncedEngine } from "../loop/weight-sync.js";
import type { RolloutEngine } from "../rollout/async-rollout.js";
import { type ProgramWork, type RolloutEvents } from "../rollout/remote/program-work.js";
import { RemotePrograms } from "../rollout/remote/remote-programs.js";
import { localPrograms, type ProgramRunner } from "../rollout/sync-rollout.js";
import { createSandboxPool, type SandboxPool } from "../sandbox/pool.js";
import { createStore, openStore } from "../store/registry.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { draftServiceHost, engineServerOptions, withDraftService, withV0Draft } from "./engine-start.js";
import { startExternalEngine } from "./external-engines.js";
import { clusterStartVersion, clusterSyncedEngines, servedEngines, type ResumedPolicy } from "./cluster-services.js";
import { metricsEngines, remoteCacheStats, type CacheCounters } from "./engine-cache-stats.js";
import { sandboxesFromConfig } from "./sandboxes-from-config.js";
import { waitReady } from "./wait-ready.js";

/** What the run's loop needs from wherever its parts are. */
export interface RunDeployment {
  store: TrajectoryStore;
  /** The SQLite file, or the networked store's name. */
  storePath: string;
  gatewayUrl: string;
  /** Every backend the gateway routes to (the judge may call them). */
  backends: Backend[];
  /** Engines loading weights over Arbor's engine API (POST /v1/load_weights). */
  engines: SyncedEngine[];
  /** External engines switching weights through their own API. */
  external: SyncedBackend[];
  /** The instances the scheduling policy places programs on. */
  instances: RolloutEngine[];
  /** Whether the engines serve this run's policy versions (they can then be tracked per call). */
  trackVersions: boolean;
  /** The policy version the engines serve as the run starts (a cluster's may serve an earlier run's); absent: 0. */
  startVersion?: number;
  programs: ProgramRunner;
  /** With a cluster: this orchestrator process on the workers, and the cut of an earlier one's work (a resumed run). */
  workers?: Pick<RemotePrograms, "session" | "cutEarlier">;
  /** Called as each program ends (the embedded sandbox pool prepares one more). */
  programDone(): void;
  /**
   * Prompt tokens looked up and found in the engines' prefix caches, and preemptions: the in-process engines'
   * counters, and what engines reached by URL (vLLM, Arbor engines: engine-cache-stats.ts) added since the start.
   */
  engineStats(): Promise<CacheCounters>;
  /** The version each in-process engine serves. */
  engineVersions(): number[];
  /** With a cluster: tells its other parts (the event bus) that the engines serve a new policy version. */
  announce?: (sync: WeightSync) => WeightSync;
  /** With a cluster, train.trainer: external goes through its trainer-api service (else the protocol is served here). */
  trainerApi?: (o: { runId: string; waitMs: number; signal: AbortSignal; start?: TrainerStart }) => Promise<Trainer>;
}

export interface DeploymentContext {
  cfg: RunConfig;
  /** Tasks each iteration rolls out (`env.tasks` as a count, or as many as the task file gives: envs/from-config.ts). */
  tasksPerIteration: number;
  modelPath: string;
  outDir: string;
  clock: Clock;
  adminToken: string | undefined;
  log: (line: string) => void;
  /** Registers what must be closed when the run ends (closed in reverse order, even when starting fails). */
  onClose(close: () => Promise<void>): void;
  onBackendReply?: (backend: string, reply: BackendReply) => void;
}

/** The embedded default: engines, gateway, store and sandboxes in this process. */
export async function startEmbedded(c: DeploymentContext): Promise<RunDeployment> {
  const { cfg, clock, log } = c;
  const engines: ListeningEngineServer[] = [];
  c.onClose(async () => {
    await Promise.allSettled(engines.map((e) => e.close()));
  });
  for (const [i, e] of cfg.engines.entries()) {
    // The run's gateway sends whole calls, which prefill and decode engines refuse.
    if (e.role !== "mixed") {
      throw new ArborError(`engines[${i}].role: "${e.role}" engines are served by \`arbor serve engine\` (a run's gateway does not route prefill→decode calls yet); use mixed`, "config");
    }
  }
  // Suffix-speculating engines share one engine's group trees (it starts first: it is the first of them).
  const host = draftServiceHost(cfg.engines);
  for (const [i, e] of cfg.engines.entries()) {
    const hostUrl = host !== undefined && i !== host ? engines[host]?.url : undefined;
    const ready = withV0Draft(hostUrl ? withDraftService(e, hostUrl) : e, c.modelPath, cfg.train?.draftModel?.layers ?? 1, log);
    engines.push(await startEngineServer(engineServerOptions(ready, { modelPath: c.modelPath, host: "127.0.0.1", seed: cfg.seed + i, clock })));
  }
  if (host !== undefined) log(`specdec  engines share ${cfg.engines[host]?.name}'s draft group trees (${engines[host]?.url}/v1/specdec)`);
  engines.forEach((e, i) => log(`engine   ${e.url} (${cfg.engines[i]?.executor}, policy version 0)`));
  const backendCfgs: BackendConfig[] = cfg.backends.length > 0 ? cfg.backends : cfg.engines.map((e) => ({ name: e.name, type: "builtin" }));
  const tap = (b: TokenBackend): TokenBackend => (c.onBackendReply ? tapBackend(b, c.onBackendReply) : b);
  const backends: TokenBackend[] = [];
  const external: SyncedBackend[] = [];
  // Set once each exists: an engine retired during start-up, or a program ended, may call back before.
  const late: { gateway?: ReturnType<typeof createGateway>; pool?: SandboxPool } = {};
  c.onClose(async () => {
    await Promise.allSettled(external.map((b) => b.close()));
  });
  for (const b of backendCfgs) {
    if (b.weightSync !== undefined) {
      // An external engine training switches to new weights through its own API (SGLang, vLLM, a managed llama-server).
      // One that fails to load a version leaves the gateway's rotation at once (its health checks then fail too).
      const onRetired = (name: string, reason: string): void => late.gateway?.health.callFailed(name, reason);
      const synced = await startExternalEngine({ cfg: { ...b, weightSync: b.weightSync }, modelPath: c.modelPath, workDir: join(c.outDir, "engines"), clock, wrap: tap, log, onRetired });
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

  const store = await openRunStore(cfg, c.outDir);
  c.onClose(() => store.close());
  const storePath = (store as { label?: string }).label ?? join(c.outDir, "store.sqlite");
  const { recovered } = store;
  if (recovered.runs.length > 0) {
    log(`store    ended ${recovered.programs.length} program(s) of ${recovered.runs.length} run(s) left unfinished by a killed process, as aborted`);
  }
  const gateway = createGateway({
    backends,
    // The gateway owns the programs: it creates and ends their rows and records their calls.
    store,
    // GET /programs/:id/trace reads the program's calls back from the store.
    traceSource: { callsOf: async (id) => (await store.getTrajectory(id))?.calls ?? [] },
    clock,
    routing: cfg.gateway.routing,
    callTimeoutMs: cfg.gateway.callTimeoutMs,
    maxTokensPolicy: cfg.gateway.maxTokensPolicy,
    health: cfg.gateway.health,
    onProgramTerminated: async (id) => {
      await late.pool?.reclaim(id);
    },
    ...(cfg.gateway.pausing.enabled ? { pausing: cfg.gateway.pausing } : {}),
    ...(cfg.gateway.dividedRollout ? { dividedRollout: cfg.gateway.dividedRollout } : {}),
    ...(c.adminToken && cfg.gateway.auth ? { auth: { adminToken: c.adminToken, requireProgramKeys: cfg.gateway.auth.requireProgramKeys } } : {}),
    ...(cfg.gateway.limits ? { limits: cfg.gateway.limits } : {}),
  });
  late.gateway = gateway;
  c.onClose(() => gateway.close());
  if (external.length > 0) registerWeightMetrics(gateway.metrics.registry, external);
  await gateway.checkBackends();
  const gatewayUrl = await gateway.listen(cfg.gateway.host, cfg.gateway.port);
  const routing = typeof cfg.gateway.routing === "string" ? cfg.gateway.routing : "custom routing";
  log(`gateway  ${gatewayUrl} (${routing} over ${backends.map((b) => b.name).join(", ")})`);

  const sandboxes = await sandboxesFromConfig(cfg, clock, cfg.sandbox.root, log);
  c.onClose(() => sandboxes.destroyAll());
  const swept = (sandboxes as { sweptOnStart?: string[] }).sweptOnStart ?? [];
  if (swept.length > 0) log(`sandbox  removed ${swept.length} workspace(s) left behind by killed runs`);
  // Hook-based GC (ThunderAgent §B2): a program's sandbox is reclaimed as soon as the gateway ends
  // the program, whatever the cause; the leak check catches any sandbox whose program is gone.
  const sandboxPool = createSandboxPool({
    provider: sandboxes,
    clock,
    warmSize: cfg.sandbox.poolSize,
    registry: gateway.metrics.registry,
    livePrograms: () => gateway.table.list().filter((p) => p.state === "active").map((p) => p.id),
    leakCheckMs: cfg.sandbox.leakCheckMs,
    log: (line) => log(`sandbox  ${line}`),
  });
  late.pool = sandboxPool;
  c.onClose(() => sandboxPool.close());
  // Asynchronous preparation: the first programs find warm sandboxes; each program that ends
  // starts the preparation of one more, for the program that will take its place.
  if (cfg.sandbox.poolSize > 0) sandboxPool.prepare(cfg.sandbox.poolSize);
  const remoteStats = await remoteCacheStats(metricsEngines(backendCfgs));
  const programsInAll = c.tasksPerIteration * cfg.iterations * cfg.rollout.groupSize;
  let done = 0;

  return {
    store,
    storePath,
    gatewayUrl,
    backends,
    engines: cfg.engines.map((e, i) => ({ name: e.name, url: (engines[i] as ListeningEngineServer).url, inFlight: e.inFlightOnWeightSwitch })),
    external,
    // The in-process engines, else (external backends only) one per backend, each taking up to `concurrency`
    // programs with their whole token budget. Backends without weight sync serve versions of their own.
    instances: instancesOf(cfg, cfg.engines, backends),
    trackVersions: cfg.engines.length > 0 || external.length > 0,
    programs: localPrograms(sandboxPool.asProvider()),
    programDone: () => {
      done++;
      if (cfg.sandbox.poolSize > 0 && done + cfg.sandbox.poolSize < programsInAll) sandboxPool.prepare(1);
    },
    engineStats: async () => {
      // Scheduled executors only count their cache; an engine's counters cover every policy version it served.
      const stats = engines.map((e) => e.slot.counters());
      const sum = (f: (x: (typeof stats)[number]) => number | undefined): number => stats.reduce((n, x) => n + (f(x) ?? 0), 0);
      const r = await remoteStats();
      return { queries: sum((x) => x.prefixCacheQueries) + r.queries, hits: sum((x) => x.prefixCacheHits) + r.hits, preemptions: sum((x) => x.preemptions) + r.preemptions };
    },
    engineVersions: () => engines.map((e) => e.slot.policyVersion),
  };
}

/**
 * The deployment of `cluster` (run config `cfg` merged with it by `loadClusterRunConfig`): its Postgres store,
 * its gateway by URL (waited for until ready), its engines by their backends' URLs, programs on its workers.
 * @param resumed a resumed training run's policy version and checkpoint (the engines must serve it or version 0)
 */
export async function connectCluster(c: DeploymentContext, cluster: ClusterConfig, resumed?: ResumedPolicy): Promise<RunDeployment> {
  const { cfg, clock, log } = c;
  const broker = clusterBroker(cluster, "arbor run --cluster");
  const gatewayUrl = clusterGatewayUrl(cluster);
  const backends = cfg.backends.map((b) => createBackend(b));
  const store = await openRunStore(cfg, c.outDir);
  c.onClose(() => store.close());
  const storePath = (store as { label?: string }).label ?? "postgres store";
  await waitReady(gatewayUrl, clock, 60_000, log);
  log(`gateway  ${gatewayUrl} (cluster ${cluster.name}; ready)`);
  const streams = clusterStreams(cluster);
  const queueOptions = { stream: streams.programs, ackWaitMs: broker.ackWaitMs, maxDeliver: broker.maxDeliver, duplicateWindowMs: broker.duplicateWindowMs };
  const queue = await JetStreamWorkQueue.connect<ProgramWork>(broker.url, queueOptions);
  c.onClose(() => queue.close());
  const bus = await JetStreamEventBus.connect<RolloutEvents & TrainerEvents>(broker.url, { stream: streams.events, duplicateWindowMs: broker.duplicateWindowMs });
  c.onClose(() => bus.close());
  const programs = await RemotePrograms.start({ queue, bus, config: JSON.stringify(cfg), clock, log });
  c.onClose(() => programs.close());
  log(`workers  programs go to ${streams.programs} at ${broker.url} (arbor serve worker --cluster …)`);
  const engines = clusterSyncedEngines(cluster);
  const startVersion = await clusterStartVersion(engines, cfg.train !== undefined, log, resumed);
  // A resumed run's engines serving its own version are said so by its resume line.
  if (startVersion > 0 && resumed === undefined) log(`engines  serve policy version ${startVersion} (an earlier run's weights): this rollout records it`);
  // The engines outlive the run: the summary counts what their caches did from here on (other clients' requests too).
  const remoteStats = await remoteCacheStats(metricsEngines(cfg.backends));
  return {
    store,
    storePath,
    gatewayUrl,
    backends,
    engines,
    external: [],
    instances: instancesOf(cfg, servedEngines(cluster), backends),
    trackVersions: engines.length > 0,
    startVersion,
    programs,
    workers: programs,
    programDone: () => {},
    engineStats: remoteStats,
    engineVersions: () => [],
    announce: (sync) => announcedWeightSync(sync, bus),
    trainerApi: async ({ runId, waitMs, signal, start }) => {
      const batches = await JetStreamWorkQueue.connect<BatchWork>(broker.url, { ...queueOptions, stream: streams.batches });
      c.onClose(() => batches.close());
      const trainer = await startBrokeredTrainer({ queue: batches, bus, dir: join(c.outDir, "batches"), modelPath: start?.modelPath ?? c.modelPath, ...(start ? { version: start.version } : {}), runId, waitMs, clock, signal });
      log(`trainer  batches go to ${streams.batches} for arbor serve trainer-api (files in ${join(c.outDir, "batches")})`);
      return trainer;
    },
  };
}

/** The run's store: SQLite in the output folder, or the networked one the config names. */
async function openRunStore(cfg: RunConfig, outDir: string): Promise<TrajectoryStore> {
  const st = cfg.store;
  if (st.kind === "sqlite") {
    mkdirSync(outDir, { recursive: true });
    return createStore({ kind: "sqlite", path: join(outDir, "store.sqlite") });
  }
  return openStore({
    kind: "postgres",
    url: st.url as string,
    ...(st.schema !== undefined ? { schema: st.schema } : {}),
    ...(st.poolSize !== undefined ? { poolSize: st.poolSize } : {}),
    ...(st.reconnectMs !== undefined ? { reconnectMs: st.reconnectMs } : {}),
  });
}

/** The scheduling policy's instances: the engines, else one per backend taking `concurrency` programs. */
function instancesOf(cfg: RunConfig, engines: readonly { name: string; sequences: number; contextSize: number }[], backends: readonly Backend[]): RolloutEngine[] {
  return engines.length > 0
    ? engines.map((e) => ({ name: e.name, maxActive: e.sequences, kvCapacityTokens: e.sequences * e.contextSize }))
    : backends.map((b) => ({ name: b.name, maxActive: cfg.rollout.concurrency, kvCapacityTokens: cfg.rollout.concurrency * Math.max(cfg.agent.maxTotalTokens, 1) }));
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

/** The fields of `o` that are set. */
function pickDefined<T extends Record<string, string | undefined>>(o: T): Partial<Record<keyof T, string>> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<Record<keyof T, string>>;
}
