// `arbor serve <role>`: Arbor's parts as separate services described by one deployment file
// (cluster.yaml, src/core/cluster-config.ts): `engine --name <e>`, `gateway`, `worker --name <w>` and `trainer-api`;
// and `dashboard --store <path>`, the dashboard over a finished run (cli/dashboard/). Each part runs alone with
// GET /healthz and GET /readyz and drains gracefully on SIGTERM; `arbor run` stays the embedded mode.
import { hostname } from "node:os";
import { InvalidArgumentError, type Command } from "commander";
import { toPort, toPositiveInt } from "./arg-parsers.js";
// Each service's module is imported when it starts (`arbor --help` loads none of them).
import { ENGINE_ROLES, type EngineRole } from "../engine/engine-role.js";

/** Default port of `arbor run --dashboard` and `arbor serve dashboard`. */
export const DEFAULT_DASHBOARD_PORT = 8600;

/** Default drain bound on SIGTERM, ms. */
export const DEFAULT_DRAIN_MS = 30_000;

/** Add `serve engine`, `serve gateway`, `serve worker` and `serve trainer-api` to the `arbor` command. */
export function registerServeCommands(program: Command): void {
  const serve = program.command("serve").description("run one part of a deployment (cluster.yaml) as a service with /healthz, /readyz and a graceful drain on SIGTERM");
  serve
    .command("engine")
    .description("serve one engine of the cluster file on its host and port")
    .requiredOption("--cluster <file>", "the deployment file (cluster.yaml)")
    .requiredOption("--name <engine>", "the engine's name in the file")
    .option("--role <role>", "prefill, decode or mixed: overrides the engine's role in the file (prefill/decode hand KV over through its kvPool)", toRole)
    .option("--drain-ms <n>", "on SIGTERM, longest wait for in-flight requests before they are aborted", toDrainMs, DEFAULT_DRAIN_MS)
    .action(async (o: { cluster: string; name: string; role?: EngineRole; drainMs: number }) => {
      const { serveEngineCommand } = await import("./serve-engine.js");
      await serveEngineCommand(o);
    });
  serve
    .command("gateway")
    .description("serve the cluster file's gateway over its backends, recording into its Postgres store")
    .requiredOption("--cluster <file>", "the deployment file (cluster.yaml)")
    .option("--drain-ms <n>", "on SIGTERM, longest wait for in-flight calls before they are aborted", toDrainMs, DEFAULT_DRAIN_MS)
    .action(async (o: { cluster: string; drainMs: number }) => {
      const { serveGatewayCommand } = await import("./serve-gateway.js");
      await serveGatewayCommand(o);
    });
  serve
    .command("worker")
    .description("run programs taken from the cluster's work stream (agents in their sandboxes), reporting each end")
    .requiredOption("--cluster <file>", "the deployment file (cluster.yaml)")
    .option("--name <name>", "the worker's name, unique per worker (default: the host name)", hostname())
    .option("--concurrency <n>", "programs at once (default: the file's worker.concurrency)", toPositiveInt)
    .option("--port <n>", "port of /healthz and /readyz (default: the file's worker.port; 0 for any free port)", toPort)
    .option("--drain-ms <n>", "on SIGTERM, longest wait for the programs in flight before they are aborted (each still ends recorded)", toDrainMs, DEFAULT_DRAIN_MS)
    .action(async (o: { cluster: string; name: string; concurrency?: number; port?: number; drainMs: number }) => {
      const { serveWorkerCommand } = await import("./serve-worker.js");
      await serveWorkerCommand(o);
    });
  serve
    .command("trainer-api")
    .description("serve the trainer protocol to trainers outside the deployment: batches from the cluster's broker, weights loaded on its engines")
    .requiredOption("--cluster <file>", "the deployment file (cluster.yaml)")
    .option("--drain-ms <n>", "on SIGTERM, longest wait for a trainer's ack of the batch it holds (else the batch goes back to the queue)", toDrainMs, DEFAULT_DRAIN_MS)
    .action(async (o: { cluster: string; drainMs: number }) => {
      const { serveTrainerApiCommand } = await import("./serve-trainer-api.js");
      await serveTrainerApiCommand(o);
    });
  serve
    .command("dashboard")
    .description("serve the dashboard (web UI and JSON/SSE API, docs/dashboard.md) read-only over a run's store and output folder")
    .requiredOption("--store <path>", "the store: a SQLite file (a run's <output.dir>/store.sqlite), a run's output folder, or a postgres:// URL")
    .option("--run-dir <dir>", "the run's output folder, for metrics.jsonl (default: the store's folder)")
    .option("--validation <report.json>", "an `arbor validate` report whose dropped tasks are highlighted with their reasons")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--port <n>", "port to listen on (0 for any free port)", toPort, DEFAULT_DASHBOARD_PORT)
    .action(async (o: { store: string; runDir?: string; validation?: string; host: string; port: number }) => {
      const { serveDashboardCommand } = await import("./dashboard/dashboard-command.js");
      await serveDashboardCommand(o);
    });
}



function toDrainMs(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`must be an integer >= 0 (ms), got ${v}`);
  return n;
}

function toRole(v: string): EngineRole {
  if (!(ENGINE_ROLES as readonly string[]).includes(v)) throw new InvalidArgumentError(`must be ${ENGINE_ROLES.join(", ")}, got ${JSON.stringify(v)}`);
  return v as EngineRole;
}
