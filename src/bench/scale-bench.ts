// `arbor bench scale`: programs per second of one run with 1, 2 and 4 worker processes (`arbor serve worker`) on
// the same deployment — two cost-model engines (`arbor serve engine`, modelled time), the gateway, Postgres and
// NATS JetStream — side by side, each row with its ratio to one worker. Every process is real: the orchestrator
// is `arbor run --cluster`, programs go to the workers over the broker and run in their bubblewrap sandboxes.
// A second table compares, on the same workload and workers, two mixed `llamacpp-scheduled` engines with one
// prefill and one decode engine behind a backend `type: disagg` (the KV handed over through the Redis pool).
// Needs Postgres, NATS and Redis (the local ones by default); says which is missing otherwise.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { Redis } from "ioredis";
import pg from "pg";
import { ArborError } from "../core/errors.js";
import { freePort } from "../core/free-port.js";
import { realClock } from "../core/real-clock.js";
import { RedisStatePool } from "../engine/kv/redis-state-pool.js";
import type { Benchmark, BenchOptions, BenchTable } from "./bench.js";

export interface ScaleBenchConfig {
  quick: boolean;
  /** Worker processes of each row. */
  workers: number[];
  /** Programs one worker runs at once. */
  workerConcurrency: number;
  /** calc tasks of the run, and programs per task. */
  tasks: number;
  groupSize: number;
  /** Tokens of each model call (the cost model's time per call grows with it). */
  maxTokensPerCall: number;
  costProfile: string;
  postgresUrl: string;
  natsUrl: string;
  /** Workers of both rows of the prefill/decode table. */
  disaggWorkers: number;
  /** Sequences of each llama.cpp engine of that table. */
  engineSequences: number;
  /** The KV pool of the prefill and decode engines. */
  redisUrl: string;
}

/** The workload; `quick` is small enough for tests and smoke runs. */
export function scaleBenchConfig(quick: boolean): ScaleBenchConfig {
  return {
    quick,
    workers: quick ? [1, 2] : [1, 2, 4],
    workerConcurrency: 4,
    tasks: quick ? 2 : 16,
    groupSize: quick ? 2 : 4,
    maxTokensPerCall: 16,
    costProfile: "llama-3-8b/h100",
    postgresUrl: process.env.ARBOR_BENCH_POSTGRES_URL ?? process.env.ARBOR_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    natsUrl: process.env.ARBOR_BENCH_NATS_URL ?? "nats://127.0.0.1:4222",
    disaggWorkers: quick ? 2 : 4,
    engineSequences: 8,
    redisUrl: process.env.ARBOR_BENCH_REDIS_URL ?? "redis://127.0.0.1:6379",
  };
}

/** One row: a run with `workers` workers. */
export interface ScaleRun {
  workers: number;
  programs: number;
  /** The run's elapsed time as its summary says (connecting to the deployment included). */
  elapsedS: number;
}

/** Run the benchmark with `cfg`; `arbor` is the argv that runs the CLI. */
export async function runScaleBench(cfg: ScaleBenchConfig, arbor: readonly string[], log: (line: string) => void): Promise<BenchTable[]> {
  await reachable(cfg);
  log("starting the engines and the gateway");
  const d = await startDeployment(cfg, arbor, costModelLayout(cfg));
  const runs: ScaleRun[] = [];
  try {
    for (const n of cfg.workers) {
      runs.push(await runWith(d, arbor, n, cfg.tasks * cfg.groupSize, log));
      const last = runs[runs.length - 1] as ScaleRun;
      log(`${n} worker(s): ${last.programs} programs in ${last.elapsedS.toFixed(1)} s`);
    }
  } finally {
    await d.close();
  }
  const base = runs[0] as ScaleRun;
  const rate = (r: ScaleRun): number => r.programs / r.elapsedS;
  return [
    {
      title: `Programs per second by worker processes (${cfg.tasks * cfg.groupSize} calc programs, ${cfg.workerConcurrency} at once per worker, 2 cost-model engines ${cfg.costProfile})`,
      columns: ["workers", "programs", "elapsed s", "programs/s", "× 1 worker"],
      rows: runs.map((r) => [r.workers, r.programs, r.elapsedS.toFixed(1), rate(r).toFixed(2), (rate(r) / rate(base)).toFixed(2)]),
      notes: [
        "Each row is one `arbor run --cluster` on the same services (engines, gateway, Postgres, NATS JetStream) with that many fresh workers.",
        "Workers share this machine's cores with the engines, the gateway and the sandboxes, so the ratio is bounded by the cores here, not by Arbor.",
      ],
    },
    await disaggTable(cfg, arbor, log),
  ];
}

/** One row of the prefill/decode table. */
export interface DisaggRun extends ScaleRun {
  setup: string;
  /** Requests each engine finished during the run (its /metrics), by engine name. */
  engineRequests: Record<string, number>;
}

/**
 * The same workload with `disaggWorkers` workers on two mixed llama.cpp engines, then on one prefill and one
 * decode engine behind a backend `type: disagg`, each on a deployment of its own started after the last closed.
 */
async function disaggTable(cfg: ScaleBenchConfig, arbor: readonly string[], log: (line: string) => void): Promise<BenchTable> {
  const runs: DisaggRun[] = [];
  const n = cfg.disaggWorkers;
  for (const [setup, layout] of [
    ["2 mixed engines", mixedLayout(cfg)],
    ["1 prefill + 1 decode (disagg)", disaggLayout(cfg)],
  ] as const) {
    log(`${setup}: starting the engines and the gateway`);
    const d = await startDeployment(cfg, arbor, layout);
    try {
      const before = await finishedRequests(d.engines);
      const run = await runWith(d, arbor, n, cfg.tasks * cfg.groupSize, log);
      const after = await finishedRequests(d.engines);
      const engineRequests = Object.fromEntries(Object.keys(d.engines).map((e) => [e, (after[e] ?? 0) - (before[e] ?? 0)]));
      // Both engines of the pair must have served (one whose decode engine answered nothing handed no KV over);
      // of two mixed engines, routing may leave one idle with so few programs.
      const idle = Object.keys(engineRequests).filter((e) => engineRequests[e] === 0);
      if (layout.kvPool !== undefined && idle.length > 0) throw new ArborError(`bench scale: ${setup}: engine(s) ${idle.join(", ")} finished no request during the run`, "internal");
      runs.push({ setup, ...run, engineRequests });
      const last = runs[runs.length - 1] as DisaggRun;
      log(`${setup}, ${n} worker(s): ${last.programs} programs in ${last.elapsedS.toFixed(1)} s`);
    } finally {
      await d.close();
    }
  }
  const rate = (r: ScaleRun): number => r.programs / r.elapsedS;
  const base = runs[0] as DisaggRun;
  return {
    title: `Two mixed engines vs a prefill/decode pair (${cfg.tasks * cfg.groupSize} calc programs, ${n} workers × ${cfg.workerConcurrency}, llamacpp-scheduled on models/calc-sft.gguf, ${cfg.engineSequences} sequences each)`,
    columns: ["setup", "workers", "programs", "engine requests", "elapsed s", "programs/s", "× mixed"],
    rows: runs.map((r) => [
      r.setup,
      r.workers,
      r.programs,
      Object.entries(r.engineRequests)
        .map(([e, k]) => `${e} ${k}`)
        .join(", "),
      r.elapsedS.toFixed(1),
      rate(r).toFixed(2),
      (rate(r) / rate(base)).toFixed(2),
    ]),
    notes: [
      "Both rows: the same run, workers and number of engine processes; engine requests are the requests each engine finished (a split call is one on each of p0 and d0). Disagg: every call is prefilled on the prefill engine, its KV written to the Redis pool, taken by the decode engine, which generates the rest (the backend's cost-aware placement over 1 + 1 engines).",
      "On a 2-core CPU machine the engines share the two cores with each other, the gateway, the workers, the sandboxes and Redis: a prefill engine cannot run beside a busy decode engine without taking its core, and each handoff adds a state export, two Redis round trips and an import. The ratio here measures that overhead on a tiny model, not what disaggregation gains where prefill and decode each have an accelerator of their own.",
    ],
  };
}

export const scaleBench: Benchmark = {
  name: "scale",
  description: "programs per second with 1, 2 and 4 worker processes on cost-model engines, and two mixed engines vs a prefill/decode pair (Postgres, NATS, Redis)",
  run: async (opts: BenchOptions) => {
    if (opts.arbor === undefined) throw new ArborError("bench scale: needs the command that runs arbor (run it as `arbor bench scale`)", "config");
    return runScaleBench(scaleBenchConfig(opts.quick), opts.arbor, opts.log);
  },
};

/** Throws naming Postgres or NATS when one cannot be reached. */
async function reachable(cfg: ScaleBenchConfig): Promise<void> {
  const client = new pg.Client({ connectionString: cfg.postgresUrl, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
  } catch (e) {
    throw new ArborError(`bench scale: Postgres at ${cfg.postgresUrl} is unreachable (${(e as Error).message}); set ARBOR_BENCH_POSTGRES_URL or start it (scripts/start-services.sh)`, "config");
  } finally {
    await client.end().catch(() => undefined);
  }
  try {
    const nc = await connect({ servers: cfg.natsUrl, timeout: 3000, reconnect: false });
    await nc.close();
  } catch (e) {
    throw new ArborError(`bench scale: NATS at ${cfg.natsUrl} is unreachable (${(e as Error).message}); set ARBOR_BENCH_NATS_URL or start it (scripts/start-services.sh)`, "config");
  }
  const redis = new Redis(cfg.redisUrl, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (e) {
    throw new ArborError(`bench scale: Redis at ${cfg.redisUrl} is unreachable (${(e as Error).message || (e as Error).name}); set ARBOR_BENCH_REDIS_URL or start it (the prefill/decode rows' KV pool)`, "config");
  } finally {
    redis.disconnect();
  }
}

/** The engines and backends of one deployment, as cluster-file lines for the ports given to its engines. */
interface Layout {
  /** Engine names, each started with `arbor serve engine --name`. */
  engines: string[];
  lines(ports: Record<string, number>): { engines: string[]; backends: string[] };
  /**
   * The gateway, workers and run read a cluster file without the engines. `arbor run --cluster` loads weights
   * onto each engine of its file at the URL of the backend of the same name, and a prefill or decode engine has
   * none (it is reached through the disagg backend); the mixed row does the same so both place programs alike.
   */
  enginesApart: boolean;
  /** The name of the engines' KV pool, emptied on close. */
  kvPool?: string;
}

function costModelLayout(cfg: ScaleBenchConfig): Layout {
  return {
    engines: ["e0", "e1"],
    lines: (ports) => ({
      engines: ["e0", "e1"].map((e) => `  - {name: ${e}, host: 127.0.0.1, port: ${ports[e]}, sequences: 16, contextSize: 2048, executor: costmodel, costProfile: ${cfg.costProfile}}`),
      backends: ["e0", "e1"].map((e) => `  - {name: ${e}, type: builtin, url: "http://127.0.0.1:${ports[e]}/v1"}`),
    }),
    enginesApart: false,
  };
}

const llamaEngine = (cfg: ScaleBenchConfig, name: string, port: number | undefined, extra = ""): string =>
  `  - {name: ${name}, host: 127.0.0.1, port: ${port}, sequences: ${cfg.engineSequences}, contextSize: 2048, executor: llamacpp-scheduled${extra}}`;

function mixedLayout(cfg: ScaleBenchConfig): Layout {
  return {
    engines: ["m0", "m1"],
    lines: (ports) => ({
      engines: ["m0", "m1"].map((e) => llamaEngine(cfg, e, ports[e])),
      backends: ["m0", "m1"].map((e) => `  - {name: ${e}, type: builtin, url: "http://127.0.0.1:${ports[e]}/v1"}`),
    }),
    enginesApart: true,
  };
}

function disaggLayout(cfg: ScaleBenchConfig): Layout {
  // A pool of its own, emptied when the deployment closes (startDeployment's clean-up).
  const kvPool = `bench-scale-${randomBytes(4).toString("hex")}`;
  const pool = `kvPool: {url: "${cfg.redisUrl}", name: ${kvPool}, capacityBytes: 268435456}`;
  return {
    engines: ["p0", "d0"],
    lines: (ports) => ({
      engines: [llamaEngine(cfg, "p0", ports.p0, `, role: prefill, ${pool}`), llamaEngine(cfg, "d0", ports.d0, `, role: decode, ${pool}`)],
      backends: [`  - {name: pd, type: disagg, prefill: ["http://127.0.0.1:${ports.p0}/v1"], decode: ["http://127.0.0.1:${ports.d0}/v1"]}`],
    }),
    enginesApart: true,
    kvPool,
  };
}

/** The services every row shares, and where its files are. */
interface Deployment {
  cluster: string;
  runPath: string;
  /** Each engine's base URL, by name. */
  engines: Record<string, string>;
  close(): Promise<void>;
}

/** Start the engines of `layout` and the gateway of a fresh deployment (its own schema, streams, KV pool and folder). */
async function startDeployment(cfg: ScaleBenchConfig, arbor: readonly string[], layout: Layout): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), "arbor-bench-scale-"));
  // Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
  chmodSync(dir, 0o755);
  const id = randomBytes(4).toString("hex");
  const name = `bench_scale_${id}`;
  const schema = `arbor_bench_${id}`;
  const procs: Service[] = [];
  const close = async (): Promise<void> => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGKILL");
    await Promise.all(procs.map((p) => p.exited));
    await cleanUp(cfg, name, schema, layout.kvPool);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const ports: Record<string, number> = { gw: await freePort() };
    for (const e of layout.engines) ports[e] = await freePort();
    const lines = layout.lines(ports);
    const head = [
      `name: ${name}`,
      // The tokenizer and template the engines serve with (the cost-model engines' tokens are modelled).
      `model: {path: "${join(import.meta.dirname, "../../models/calc-sft.gguf")}"}`,
      `store: {kind: postgres, url: "${cfg.postgresUrl}", schema: ${schema}}`,
      `broker: {kind: nats, url: "${cfg.natsUrl}"}`,
    ];
    const tail = ["backends:", ...lines.backends, `gateway: {host: 127.0.0.1, port: ${ports.gw}}`, `worker: {host: 127.0.0.1, port: 0, concurrency: ${cfg.workerConcurrency}}`];
    const cluster = join(dir, "cluster.yaml");
    const engines = layout.enginesApart ? join(dir, "engines.yaml") : cluster;
    writeFileSync(engines, [...head, "engines:", ...lines.engines, ...tail].join("\n"));
    if (layout.enginesApart) writeFileSync(cluster, [...head, ...tail].join("\n"));
    const run = {
      name: "bench-scale",
      env: { name: "calc", tasks: cfg.tasks, seed: 7 },
      rollout: { groupSize: cfg.groupSize, concurrency: 256 },
      agent: { maxTurns: 3, maxTokensPerCall: cfg.maxTokensPerCall, maxTotalTokens: 4 * cfg.maxTokensPerCall, temperature: 1.0 },
      sandbox: { root: join(dir, "sandboxes") },
      output: { dir: join(dir, "out") },
    };
    const runPath = join(dir, "run.yaml");
    writeFileSync(runPath, JSON.stringify(run));
    const serve = (args: string[], file: string): Service => {
      const s = start(arbor, ["serve", ...args, "--cluster", file]);
      procs.push(s);
      return s;
    };
    const started = layout.engines.map((e) => [e, serve(["engine", "--name", e], engines)] as const);
    const gw = serve(["gateway"], cluster);
    for (const [e, s] of started) await ready(`http://127.0.0.1:${ports[e]}`, s);
    await ready(`http://127.0.0.1:${ports.gw}`, gw);
    return { cluster, runPath, engines: Object.fromEntries(layout.engines.map((e) => [e, `http://127.0.0.1:${ports[e]}`])), close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** One run with `workers` fresh workers, stopped (drained) afterwards. */
async function runWith(d: Deployment, arbor: readonly string[], workers: number, expected: number, log: (line: string) => void): Promise<ScaleRun> {
  const procs: Service[] = [];
  try {
    for (let i = 0; i < workers; i++) procs.push(start(arbor, ["serve", "worker", "--cluster", d.cluster, "--name", `w${i}`]));
    for (const w of procs) await ready(await workerUrl(w), w);
    log(`${workers} worker(s): running ${expected} programs`);
    const orchestrator = start(arbor, ["run", d.runPath, "--cluster", d.cluster, "--no-progress"]);
    procs.push(orchestrator);
    const code = await orchestrator.exited;
    if (code !== 0) throw new ArborError(`bench scale: the run with ${workers} worker(s) failed (exit ${code}):\n${orchestrator.log().slice(-2000)}`, "internal");
    const elapsed = /elapsed\s+([\d.]+) s/.exec(orchestrator.log());
    const programs = /programs\s+(\d+) \(/.exec(orchestrator.log());
    if (!elapsed || !programs) throw new ArborError(`bench scale: no run summary in the orchestrator's output:\n${orchestrator.log().slice(-2000)}`, "internal");
    return { workers, programs: Number(programs[1]), elapsedS: Number(elapsed[1]) };
  } finally {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
  }
}

interface Service {
  child: ChildProcess;
  log(): string;
  exited: Promise<number | null>;
}

function start(arbor: readonly string[], args: string[]): Service {
  const [cmd, ...pre] = arbor as [string, ...string[]];
  const child = spawn(cmd, [...pre, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
  return { child, log: () => out, exited };
}

/** Poll GET /readyz until 200 (at most 90 s; the service's exit or the timeout is an error with its log). */
async function ready(base: string, s: Service): Promise<void> {
  const until = realClock.now() + 90_000;
  for (;;) {
    if (s.child.exitCode !== null) throw new ArborError(`bench scale: a service exited (${s.child.exitCode}):\n${s.log().slice(-2000)}`, "internal");
    const ok = await fetch(`${base}/readyz`).then((r) => r.ok, () => false);
    if (ok) return;
    if (realClock.now() > until) throw new ArborError(`bench scale: ${base} not ready after 90 s:\n${s.log().slice(-2000)}`, "internal");
    await realClock.sleep(200);
  }
}

/** Requests each engine has finished (`vllm:request_success_total`, every finish reason), by engine name. */
async function finishedRequests(engines: Record<string, string>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [name, base] of Object.entries(engines)) {
    const text = await (await fetch(`${base}/metrics`)).text();
    out[name] = [...text.matchAll(/^vllm:request_success_total\{[^}]*\} ([\d.e+]+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  }
  return out;
}

/** A worker's URL, from its log line (it listens on a free port). */
async function workerUrl(s: Service): Promise<string> {
  const until = realClock.now() + 90_000;
  for (;;) {
    const m = /listening on (http:\/\/\S+)/.exec(s.log());
    if (m) return m[1] as string;
    if (s.child.exitCode !== null || realClock.now() > until) throw new ArborError(`bench scale: a worker did not start:\n${s.log().slice(-2000)}`, "internal");
    await realClock.sleep(100);
  }
}

/** Drop the run's schema, delete its streams and empty its KV pool (best effort: a failure leaves only stale data). */
async function cleanUp(cfg: ScaleBenchConfig, name: string, schema: string, kvPool?: string): Promise<void> {
  if (kvPool !== undefined) {
    const pool = new RedisStatePool({ url: cfg.redisUrl, capacityBytes: 1, name: kvPool });
    await pool.clear().catch(() => undefined);
    await pool.close().catch(() => undefined);
  }
  const client = new pg.Client({ connectionString: cfg.postgresUrl, connectionTimeoutMillis: 3000 });
  await client
    .connect()
    .then(() => client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))
    .catch(() => undefined)
    .finally(() => client.end().catch(() => undefined));
  const nc = await connect({ servers: cfg.natsUrl, timeout: 3000, reconnect: false }).catch(() => undefined);
  if (nc === undefined) return;
  try {
    const jsm = await jetstreamManager(nc);
    for await (const s of jsm.streams.list()) if (s.config.name.startsWith(`ARBOR_${name}_`)) await jsm.streams.delete(s.config.name);
  } catch {
    // Best effort, as above.
  } finally {
    await nc.close();
  }
}
