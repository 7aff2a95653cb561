// The deployment file (`cluster.yaml`) of Arbor run as separate services: `arbor serve engine --name <e>`
// starts one of its engines, `arbor serve gateway` its gateway over its backends, recording into its
// networked store. It reuses the run config's schemas (engines, backends, gateway, model), so one engine
// or gateway block means the same in both files; an invalid file fails with the field and the reason.
import { z } from "./zod.js";
import { applyOverrides, type ConfigOverride } from "./config-overrides.js";
import { BackendConfigSchema, EngineConfigSchema, formatZodError, GatewayConfigSchema, ModelConfigSchema, parseRunConfig, readYamlFile, resolveConfigPaths, type RunConfig } from "./config.js";
import { ArborError } from "./errors.js";

/** One engine of the deployment: the run config's engine, plus the address it listens on (any host). */
export const ClusterEngineConfigSchema = EngineConfigSchema.extend({
  /** Address to listen on: 0.0.0.0 to be reached from other hosts (run's engines listen on 127.0.0.1). */
  host: z.string().min(1, { error: "must be a host name or address to listen on" }).default("127.0.0.1"),
}).strict();

/** The gateway's store: Postgres only, because every gateway (and later worker) on any host shares it. */
export const ClusterStoreConfigSchema = z
  .object({
    kind: z.enum(["postgres", "sqlite"], { error: "must be postgres" }),
    url: z.string().min(1).optional(),
    schema: z.string().min(1).optional(),
    poolSize: z.number().int().min(1).optional(),
  })
  .strict()
  .superRefine((st, ctx) => {
    if (st.kind === "sqlite") {
      ctx.addIssue({ code: "custom", path: ["kind"], message: "sqlite cannot be shared across hosts (it is a file on one machine); use kind: postgres with a url" });
    } else if (st.url === undefined) {
      ctx.addIssue({ code: "custom", path: ["url"], message: "required for the postgres store (e.g. postgres://postgres@127.0.0.1:5432/arbor)" });
    }
  });

/** The message broker the orchestrator and workers share: NATS with JetStream. */
export const ClusterBrokerConfigSchema = z
  .object({
    kind: z.literal("nats", { error: "must be nats (NATS with JetStream)" }),
    url: z.string().min(1).default("nats://127.0.0.1:4222"),
    /** A program's delivery not acked (or extended) within this long goes to another worker. */
    ackWaitMs: z.number().int().min(1000).default(30_000),
    /** Deliveries of one program before it is dead-lettered and ended by the orchestrator. */
    maxDeliver: z.number().int().min(1).max(100).default(3),
    /** A repeat of a message id within this long is a duplicate (JetStream's duplicate window). */
    duplicateWindowMs: z.number().int().min(1000).default(120_000),
  })
  .strict();

/** Every `arbor serve worker` of the deployment (replicas share it; each has its own --name). */
export const ClusterWorkerConfigSchema = z
  .object({
    host: z.string().min(1).default("127.0.0.1"),
    /** Port of the worker's /healthz and /readyz (0: any free port, said in its log). */
    port: z.number().int().min(0).max(65535).default(0),
    /** Programs one worker runs at once. */
    concurrency: z.number().int().min(1).max(1024).default(4),
  })
  .strict();

export const ClusterConfigSchema = z
  .object({
    /** Names the broker's streams (`ARBOR_<name>_…`), so it is limited to letters, digits, `-` and `_`. */
    name: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,48}$/, { error: "must be 1-48 of [A-Za-z0-9_-] (it names the broker's streams)" })
      .default("cluster"),
    seed: z.number().int().default(1),
    /** What every engine serves (a GGUF path; absent: the tiny policy created from `init`, as `arbor run` does). */
    model: ModelConfigSchema.prefault({}),
    store: ClusterStoreConfigSchema,
    engines: z.array(ClusterEngineConfigSchema).default([]),
    /** What the gateway routes to: engines of this file by URL, or external vLLM/SGLang/llama-server ones. */
    backends: z.array(BackendConfigSchema).min(1, { error: "need at least one backend for the gateway to route to" }),
    gateway: GatewayConfigSchema.prefault({}),
    /** How workers and the orchestrator reach the gateway (default: its host and port; 127.0.0.1 for 0.0.0.0). */
    gatewayUrl: z.url({ error: "must be the gateway's URL, e.g. http://gateway:8080" }).optional(),
    /** Needed by workers and `arbor run --cluster`: programs go to workers over it. */
    broker: ClusterBrokerConfigSchema.optional(),
    worker: ClusterWorkerConfigSchema.prefault({}),
    /** `arbor serve trainer-api`: the trainer protocol for trainers outside the deployment. */
    trainerApi: z
      .object({
        host: z.string().min(1).default("127.0.0.1"),
        port: z.number().int().min(0).max(65535).default(0),
        /** As `train.external.leaseMs`: how long a batch stays with a trainer that sends no heartbeat, ms. */
        leaseMs: z.number().int().min(1).default(600_000),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((c, ctx) => {
    const seen = new Set<string>();
    c.engines.forEach((e, i) => {
      if (seen.has(e.name)) ctx.addIssue({ code: "custom", path: ["engines", i, "name"], message: `'${e.name}' is named twice` });
      seen.add(e.name);
    });
    const backends = new Set<string>();
    c.backends.forEach((b, i) => {
      if (backends.has(b.name)) ctx.addIssue({ code: "custom", path: ["backends", i, "name"], message: `'${b.name}' is named twice` });
      backends.add(b.name);
      // The gateway runs in its own process: it reaches every engine over the network, never in process.
      if (b.url === undefined && b.type !== "disagg") ctx.addIssue({ code: "custom", path: ["backends", i, "url"], message: "required in a cluster file (the engine's base URL, e.g. http://e0:8101/v1)" });
      if (b.weightSync !== undefined) ctx.addIssue({ code: "custom", path: ["backends", i, "weightSync"], message: "not supported by `arbor serve gateway` yet (weight sync belongs to the trainer role)" });
    });
  });

export type ClusterConfig = z.infer<typeof ClusterConfigSchema>;
export type ClusterEngineConfig = z.infer<typeof ClusterEngineConfigSchema>;
export type ClusterBrokerConfig = z.infer<typeof ClusterBrokerConfigSchema>;

/** The broker's streams of a deployment: program work, batch work (to the trainer-api), and events. */
export function clusterStreams(cfg: Pick<ClusterConfig, "name">): { programs: string; batches: string; events: string } {
  return { programs: `ARBOR_${cfg.name}_PROGRAMS`, batches: `ARBOR_${cfg.name}_BATCHES`, events: `ARBOR_${cfg.name}_EVENTS` };
}

/** Where workers and the orchestrator reach the gateway. */
export function clusterGatewayUrl(cfg: ClusterConfig): string {
  if (cfg.gatewayUrl !== undefined) return cfg.gatewayUrl.replace(/\/+$/, "");
  const g = cfg.gateway;
  if (g.port === 0) throw new ArborError("cluster file: gatewayUrl is required when gateway.port is 0 (the port is only known once the gateway listens)", "config");
  const host = g.host === "0.0.0.0" || g.host === "::" ? "127.0.0.1" : g.host;
  return `http://${host.includes(":") ? `[${host}]` : host}:${g.port}`;
}

/** The broker block, or an error saying that `what` needs one. */
export function clusterBroker(cfg: ClusterConfig, what: string): ClusterBrokerConfig {
  if (cfg.broker === undefined) throw new ArborError(`cluster file: ${what} needs a broker (broker: {kind: nats, url: nats://127.0.0.1:4222})`, "config");
  return cfg.broker;
}

/** Validate an already-parsed deployment object. Throws {@link ArborError} naming the field and the reason. */
export function parseClusterConfig(raw: unknown, source = "cluster file"): ClusterConfig {
  const result = ClusterConfigSchema.safeParse(raw ?? {});
  if (!result.success) throw new ArborError(`invalid ${source}: ${formatZodError(result.error)}`, "config");
  return result.data;
}

/** Load and validate a deployment YAML file. */
export function loadClusterConfig(path: string): ClusterConfig {
  return parseClusterConfig(readYamlFile(path, "cluster file"), `cluster file ${path}`);
}

/** The parts of a run config a deployment file gives instead (`arbor run --cluster`). */
const DEPLOYMENT_KEYS = ["engines", "backends", "gateway", "store", "model"] as const;

/** A run config without the keys a deployment file gives (a cluster run's stored config, merged again on resume). */
export function withoutDeploymentKeys(config: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).filter(([k]) => !(DEPLOYMENT_KEYS as readonly string[]).includes(k)));
}

/**
 * The run config at `path` for a run on `cluster`'s services: the deployment's engines (without their listen
 * host), backends, gateway, store and model merged in, so the config means what the services serve. A run
 * config that sets one of those itself is an error naming it (two answers to one question).
 */
export function loadClusterRunConfig(path: string, cluster: ClusterConfig, overrides: readonly ConfigOverride[] = []): RunConfig {
  const source = `config ${path}`;
  return resolveConfigPaths(clusterRunConfig(applyOverrides(readYamlFile(path, "config"), overrides, source), cluster, source), path);
}

/** {@link loadClusterRunConfig} of an already-parsed run config (`source` names it in errors). */
export function clusterRunConfig(raw: unknown, cluster: ClusterConfig, source: string): RunConfig {
  const given = raw ?? {};
  if (typeof given !== "object" || Array.isArray(given)) throw new ArborError(`invalid ${source}: must be a mapping`, "config");
  const own = DEPLOYMENT_KEYS.filter((k) => k in given);
  if (own.length > 0) {
    throw new ArborError(`invalid ${source}: ${own.join(", ")}: given by the cluster file with --cluster; remove ${own.length > 1 ? "them" : "it"} from the run config`, "config");
  }
  const merged = {
    ...given,
    engines: cluster.engines.map(({ host: _host, ...e }) => e),
    backends: cluster.backends,
    gateway: cluster.gateway,
    store: cluster.store,
    model: cluster.model,
  };
  return parseRunConfig(merged, `${source} (with the cluster file)`);
}

/** The engine named `name`, or an error listing the names the file has. */
export function clusterEngine(cfg: ClusterConfig, name: string): ClusterEngineConfig {
  const e = cfg.engines.find((x) => x.name === name);
  if (!e) {
    const known = cfg.engines.map((x) => x.name);
    throw new ArborError(`engine '${name}' is not in the cluster file (engines: ${known.length > 0 ? known.join(", ") : "none"})`, "config");
  }
  return e;
}
