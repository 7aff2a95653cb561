// The dashboard as commands: `arbor run … --dashboard [port]` starts it beside the run over the run's store,
// output folder, gateway and engines (`startRunDashboard`, closed with the run), and `arbor serve dashboard
// --store <path>` serves it read-only over a finished run's store and output folder until SIGINT/SIGTERM.
import { existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { realClock } from "../../core/real-clock.js";
import type { TrajectoryStore } from "../../store/trajectory-store.js";
import { openStoreArg } from "../store-arg.js";
import { createDashboardServer } from "./dashboard-server.js";
import { RunSource } from "./run-source.js";

/** Where `--dashboard` listens. */
export interface DashboardListen {
  port: number;
  host?: string;
}

export interface RunDashboardOptions {
  listen: DashboardListen;
  store: TrajectoryStore;
  outDir: string;
  gatewayUrl: string;
  gatewayAdminToken?: string;
  engines: readonly { name: string; url: string }[];
  clock: Clock;
  log: (line: string) => void;
}

/** Start the dashboard of a live run; resolves with its closer once it listens (the URL is logged). */
export async function startRunDashboard(o: RunDashboardOptions): Promise<() => Promise<void>> {
  const source = new RunSource({ store: o.store, runDir: o.outDir, gatewayUrl: o.gatewayUrl, ...(o.gatewayAdminToken ? { gatewayAdminToken: o.gatewayAdminToken } : {}), engines: o.engines, clock: o.clock });
  const server = createDashboardServer({ source, clock: o.clock });
  try {
    const url = await server.listen(o.listen.host ?? "127.0.0.1", o.listen.port);
    o.log(`dashboard ${url}/`);
  } catch (e) {
    await server.close();
    throw new ArborError(`dashboard: cannot listen on ${o.listen.host ?? "127.0.0.1"}:${o.listen.port}: ${(e as Error).message}`, "config");
  }
  return () => server.close();
}

export interface ServeDashboardOptions {
  store: string;
  /** The run's output folder (metrics.jsonl); default: the store's folder. */
  runDir?: string;
  host: string;
  port: number;
  /** An `arbor validate` report.json whose dropped tasks are highlighted. */
  validation?: string;
}

/** `arbor serve dashboard`: the dashboard over a run's store and folder, read-only, until SIGINT/SIGTERM. */
export async function serveDashboardCommand(o: ServeDashboardOptions): Promise<void> {
  const { store, label } = await openStoreArg(o.store);
  const runDir = o.runDir ?? defaultRunDir(o.store);
  if (o.runDir !== undefined && !existsSync(o.runDir)) throw new ArborError(`--run-dir: no such folder: ${o.runDir}`, "config");
  if (o.validation !== undefined && !existsSync(o.validation)) throw new ArborError(`--validation: no such file: ${o.validation}`, "config");
  const source = new RunSource({ store, ...(runDir !== undefined ? { runDir } : {}), ...(o.validation !== undefined ? { validationReport: o.validation } : {}), clock: realClock });
  const server = createDashboardServer({ source, clock: realClock });
  let url: string;
  try {
    url = await server.listen(o.host, o.port);
  } catch (e) {
    await server.close();
    await store.close();
    throw new ArborError(`dashboard: cannot listen on ${o.host}:${o.port}: ${(e as Error).message}`, "config");
  }
  console.error(`dashboard ${url}/ (${label}${runDir !== undefined ? `, curves from ${runDir}/metrics.jsonl` : ""}; Ctrl-C to stop)`);
  await new Promise<void>((done) => {
    process.once("SIGINT", done);
    process.once("SIGTERM", done);
  });
  await server.close();
  await store.close();
}

/** The run folder a SQLite store argument implies (the folder itself, or the store file's folder). */
function defaultRunDir(arg: string): string | undefined {
  if (/^postgres(ql)?:\/\//.test(arg)) return undefined;
  const p = resolve(arg);
  return existsSync(p) && statSync(p).isDirectory() ? p : dirname(p);
}
