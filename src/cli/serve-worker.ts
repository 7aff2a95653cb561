// `arbor serve worker --cluster cluster.yaml --name w0`: one worker of a deployment, alone in its process. It takes
// programs from the broker's work stream (rollout/remote/program-worker.ts), runs each in a sandbox of the run
// config the work carries (its workspaces under `<sandbox.root>/<name>`, so workers sharing a host never sweep
// each other's), records through the deployment's Postgres store and the gateway, and reports each end on the
// event stream. GET /healthz, GET /readyz, GET /programs (what it runs now); on SIGTERM it stops taking work and gives the programs in flight
// `--drain-ms` to end, then aborts the rest (each ends recorded as aborted).
import { lineLog, processLog } from "../core/logger.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify from "fastify";
import { JetStreamEventBus } from "../broker/jetstream-event-bus.js";
import { JetStreamWorkQueue } from "../broker/jetstream-work-queue.js";
import { clusterBroker, clusterGatewayUrl, clusterStreams, loadClusterConfig } from "../core/cluster-config.js";
import { parseRunConfig, servedModelOf } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { registerServiceProbes } from "../core/service-probes.js";
import { createContextPolicy } from "../agents/context/registry.js";
import { environmentFromConfig } from "../envs/from-config.js";
import { agentSpecOf } from "../rollout/blackbox-program.js";
import { type ProgramWork, type RolloutEvents } from "../rollout/remote/program-work.js";
import { ProgramWorker, type WorkerRunContext } from "../rollout/remote/program-worker.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { sandboxesFromConfig } from "./sandboxes-from-config.js";
import { openClusterStore } from "./cluster-services.js";
import { serveUntilSignalled, workProbes } from "./service-lifecycle.js";

export interface ServeWorkerOptions {
  cluster: string;
  /** The worker's name (logs, the terminations it records); unique per worker. */
  name: string;
  /** On SIGTERM, longest wait for the programs in flight before they are aborted, ms. */
  drainMs: number;
  /** Programs at once (default: the cluster file's worker.concurrency). */
  concurrency?: number;
  /** Port of /healthz and /readyz (default: the cluster file's worker.port), for several workers on one host. */
  port?: number;
  log?: (line: string) => void;
}

/** Run configs a worker keeps built (environment, sandbox provider) at once. */
const MAX_RUN_CONTEXTS = 8;

/** Connect, take work and serve until a signal; resolves once drained and closed. */
export async function serveWorkerCommand(o: ServeWorkerOptions): Promise<void> {
  const log = o.log ?? lineLog(processLog("worker"));
  if (!/^[A-Za-z0-9_.-]{1,63}$/.test(o.name)) throw new ArborError(`--name: must be 1-63 of [A-Za-z0-9_.-] (it names the worker's sandbox folder), got '${o.name}'`, "config");
  const cfg = loadClusterConfig(o.cluster);
  const broker = clusterBroker(cfg, "arbor serve worker");
  const gatewayUrl = clusterGatewayUrl(cfg);
  const concurrency = o.concurrency ?? cfg.worker.concurrency;
  const adminToken = cfg.gateway.auth ? process.env[cfg.gateway.auth.adminTokenEnv] : undefined;
  const store = await openClusterStore(cfg);
  const streams = clusterStreams(cfg);
  const closers: (() => Promise<void>)[] = [() => store.close()];
  const closeAll = async (): Promise<void> => {
    for (const c of closers.reverse()) await c().catch((e: unknown) => log(`worker ${o.name}: while closing: ${e instanceof Error ? e.message : String(e)}`));
  };
  try {
    const queue = await JetStreamWorkQueue.connect<ProgramWork>(broker.url, { stream: streams.programs, ackWaitMs: broker.ackWaitMs, maxDeliver: broker.maxDeliver, duplicateWindowMs: broker.duplicateWindowMs });
    closers.push(() => queue.close());
    const bus = await JetStreamEventBus.connect<RolloutEvents>(broker.url, { stream: streams.events, duplicateWindowMs: broker.duplicateWindowMs });
    closers.push(() => bus.close());
    const contexts = runContexts({ store, gatewayUrl, adminToken, worker: o.name, log });
    closers.push(() => contexts.close());
    const worker = await ProgramWorker.start({
      name: o.name,
      queue,
      bus,
      contextOf: contexts.get,
      concurrency,
      heartbeatMs: Math.max(500, Math.floor(broker.ackWaitMs / 3)),
      clock: realClock,
      log,
    });
    const app = Fastify();
    closers.push(() => app.close());
    const http = registerServiceProbes(app, { clock: realClock, notReady: () => undefined, refuseWhileDraining: () => undefined });
    // The programs in flight get the time to end; what is left is aborted (and still ends recorded).
    const probes = workProbes(http, { inFlight: () => worker.inFlight, settled: (ms) => worker.drain(ms) });
    // What this worker runs now (operators, and the fault tests that kill a worker mid-program).
    app.get("/programs", async () => ({ worker: o.name, running: worker.programIds, ended: worker.ended }));
    const url = await app.listen({ host: cfg.worker.host, port: o.port ?? cfg.worker.port });
    log(`worker ${o.name} listening on ${url} (/healthz, /readyz); taking programs from ${streams.programs} at ${broker.url}, ${concurrency} at once, gateway ${gatewayUrl}`);
    await serveUntilSignalled({ name: `worker ${o.name}`, probes, drainMs: o.drainMs, close: closeAll, log });
  } catch (e) {
    await closeAll();
    throw e;
  }
}

/** Run contexts by config text, built on first use and kept (the oldest closed beyond MAX_RUN_CONTEXTS). */
function runContexts(o: { store: TrajectoryStore; gatewayUrl: string; adminToken: string | undefined; worker: string; log: (line: string) => void }): {
  get(config: string): Promise<WorkerRunContext>;
  close(): Promise<void>;
} {
  const built = new Map<string, Promise<{ ctx: WorkerRunContext; sandboxes: SandboxProvider }>>();
  const build = async (config: string): Promise<{ ctx: WorkerRunContext; sandboxes: SandboxProvider }> => {
    let raw: unknown;
    try {
      raw = JSON.parse(config);
    } catch (e) {
      throw new ArborError(`program work: config is not JSON: ${(e as Error).message}`, "config");
    }
    const cfg = parseRunConfig(raw, "the run config of a program's work");
    const env = await environmentFromConfig(cfg.env);
    if (cfg.agent.context !== undefined) createContextPolicy(cfg.agent.context);
    // Each worker its own folder: a provider sweeps the workspaces it finds in its root when it starts.
    const root = join(cfg.sandbox.root ?? join(tmpdir(), "arbor-sandboxes"), o.worker);
    const sandboxes = await sandboxesFromConfig(cfg, realClock, root, o.log);
    o.log(`worker ${o.worker}: run config '${cfg.name}': env ${env.name}, ${cfg.sandbox.provider} sandboxes under ${root}`);
    const ctx: WorkerRunContext = {
      env,
      store: o.store,
      sandboxes,
      gatewayUrl: o.gatewayUrl,
      ...(o.adminToken ? { gatewayAdminToken: o.adminToken } : {}),
      model: servedModelOf(cfg),
      limits: cfg.agent,
      temperature: cfg.agent.temperature,
      seed: cfg.seed,
      clock: realClock,
      ...(cfg.agent.context !== undefined ? { context: cfg.agent.context } : {}),
      agent: agentSpecOf(cfg.agent),
    };
    return { ctx, sandboxes };
  };
  return {
    get: async (config) => {
      let entry = built.get(config);
      if (entry === undefined) {
        entry = build(config);
        built.set(config, entry);
        // A config that fails to build is not kept: the next delivery tries again (and fails the same way).
        entry.catch(() => built.delete(config));
        if (built.size > MAX_RUN_CONTEXTS) {
          const [oldest, old] = built.entries().next().value as [string, Promise<{ sandboxes: SandboxProvider }>];
          built.delete(oldest);
          void old.then((x) => x.sandboxes.destroyAll()).catch(() => undefined);
        }
      }
      return (await entry).ctx;
    },
    close: async () => {
      for (const entry of built.values()) await entry.then((x) => x.sandboxes.destroyAll(), () => undefined);
      built.clear();
    },
  };
}
