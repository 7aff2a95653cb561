// `arbor report <dir> [--out DIR] [--run ID] [--store STORE]`: the report files of `arbor sim` (report.json, a
// self-contained report.html, key-plot.png; report/write-sim-report-files.ts) for a finished real run, read from its
// output folder (store.sqlite, metrics.jsonl; a run whose store is elsewhere, a cluster's Postgres, names it with
// --store) and converted by report/run-sim-report.ts, or drawn again from a folder that holds a simulation's
// report.json. A run's files go to `<dir>/report/` unless --out says where; a
// report.json's are rewritten beside it.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ArborError } from "../core/errors.js";
import { makeOutputDir } from "../core/output-dir.js";
import { SIM_REPORT_FORMAT, type SimReport } from "../sim/scenario/sim-report.js";
import { parseSimReport } from "./report/read-sim-report.js";
import { runSimReport } from "./report/run-sim-report.js";
import { writeSimReportFiles } from "./report/write-sim-report-files.js";
import { parseMetricsLines } from "../loop/metrics-lines.js";
import { openStoreArg } from "./store-arg.js";

/** Options of `arbor report`. */
export interface ReportCommandOptions {
  /** Where the files go (default: `<dir>/report` for a run, `<dir>` for a report.json). */
  out?: string;
  /** Which run of the store (default: the run of `<dir>/metrics.jsonl` with --store, else the store's latest). */
  run?: string;
  /** The run's store when it is not `<dir>/store.sqlite` (a Postgres URL `postgres://…?schema=…`, or a SQLite file). */
  store?: string;
  log?: (line: string) => void;
}

/** Largest report.json read. */
const MAX_REPORT_BYTES = 256 * 1024 * 1024;

/** Does `path` hold a SimReport (by its format tag)? Another tool's report.json is not one. */
function isSimReport(path: string): boolean {
  if (!existsSync(path)) return false;
  const head = readFileSync(path, "utf8").slice(0, 200);
  return head.includes(`"format": "${SIM_REPORT_FORMAT}"`) || head.includes(`"format":"${SIM_REPORT_FORMAT}"`);
}

/** The run id the last line of `dir/metrics.jsonl` names (the folder's latest run), if any. */
function metricsRunId(dir: string): string | undefined {
  const path = join(dir, "metrics.jsonl");
  if (!existsSync(path)) return undefined;
  let last: string | undefined;
  for (const { fields } of parseMetricsLines(readFileSync(path, "utf8"))) if (typeof fields.runId === "string") last = fields.runId;
  return last;
}

/** Render the report of `dir` (a run's output folder, or a folder with a report.json); returns the paths written. */
export async function reportCommand(dir: string, o: ReportCommandOptions = {}): Promise<string[]> {
  const log = o.log ?? ((line: string) => console.log(line));
  if (!existsSync(dir)) throw new ArborError(`report: no such folder: ${dir}`, "config");
  if (!statSync(dir).isDirectory()) throw new ArborError(`report: ${dir} is not a folder (give a run's output folder or a folder holding a report.json)`, "config");
  const reportJson = join(dir, "report.json");
  const hasStore = o.store !== undefined || existsSync(join(dir, "store.sqlite"));
  let report: SimReport;
  let out: string;
  /** What the report is of, as its first line says: a real run's report has the format's workload kind `replay`. */
  let of: string;
  if (o.store === undefined && (isSimReport(reportJson) || (!hasStore && existsSync(reportJson)))) {
    if (o.run !== undefined) throw new ArborError(`report: --run applies to a run's folder; ${dir} holds a report.json`, "config");
    const size = statSync(reportJson).size;
    if (size > MAX_REPORT_BYTES) throw new ArborError(`report: ${reportJson} is ${size} bytes, more than the ${MAX_REPORT_BYTES} read`, "config");
    report = parseSimReport(readFileSync(reportJson, "utf8"), reportJson);
    out = o.out ?? dir;
    of = report.workload.kind;
  } else if (hasStore) {
    const { store, label } = await openStoreArg(o.store ?? dir);
    // A shared store holds other runs too: the folder's own run, named in its metrics.jsonl, unless --run says.
    const runId = o.run ?? (o.store !== undefined ? metricsRunId(dir) : undefined);
    try {
      report = await runSimReport(store, { label, runDir: dir, ...(runId !== undefined ? { runId } : {}) });
    } finally {
      await store.close();
    }
    out = o.out ?? join(dir, "report");
    of = "real run";
  } else {
    const elsewhere = existsSync(join(dir, "metrics.jsonl")) ? " (a run whose store is elsewhere, e.g. a cluster's Postgres: pass --store <url>)" : "";
    throw new ArborError(`report: ${dir} holds neither a run's store.sqlite nor a report.json of \`arbor sim\`${elsewhere}`, "config");
  }
  makeOutputDir(out, o.out !== undefined ? "--out" : "report folder");
  const paths = await writeSimReportFiles(report, out, { warn: (line) => console.error(line) });
  const s = report.systems.map((x) => `${x.system}: ${x.summary.requests} requests, ${x.summary.programs} programs, ${(x.summary.makespanMs / 1000).toFixed(1)} s, tail ${(x.summary.tailMs / 1000).toFixed(1)} s`).join("; ");
  log(`report   ${report.workload.name} (${of}) — ${s}`);
  for (const p of paths) log(`wrote    ${p}`);
  return paths;
}
