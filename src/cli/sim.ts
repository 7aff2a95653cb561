// `arbor sim <workload> --systems a,b,…`: runs a simulated workload under each named system on the virtual
// clock, shows its progress (stderr: a bar per running system on a terminal, else a line as each starts and
// ends), prints a summary table with ratios against the baseline and the papers' targets (stdout), and writes
// <out>/report.json (byte-identical for the same seed).
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { formatTable } from "../bench/format-table.js";
import type { BenchTable } from "../bench/bench.js";
import { ArborError } from "../core/errors.js";
import { makeOutputDir } from "../core/output-dir.js";
import { getScenario } from "../sim/scenario/registry.js";
import { runSim } from "../sim/scenario/run-sim.js";
import { runSystemInWorker, workerHeapMb } from "../sim/scenario/worker-run.js";
import { tailChange, targetLine, targetRows } from "./reproduction.js";
import { simProgress } from "./sim-progress.js";
import type { SimRunOptions, SimScenario } from "../sim/scenario/scenario.js";
import type { SimReport } from "../sim/scenario/sim-report.js";

/** Writes a report's HTML/PNG files into a folder and returns their paths (the report renderer). */
export type SimReportWriter = (report: SimReport, outDir: string) => Promise<string[]>;

export interface SimCommandOptions {
  /** Comma-separated system names (default: every system of the workload). */
  systems?: string;
  seed: number;
  scale: number;
  out?: string;
  json?: boolean;
  /** Systems run at once, each in a worker thread (default 1: one after another in this thread). */
  jobs?: number;
  /** The report renderer, when one is wired (main.ts passes it); without one only report.json is written. */
  writeReportFiles?: SimReportWriter;
  /** Draw a bar per running system on stderr (a terminal); otherwise a line as each starts and ends. */
  progress?: boolean;
}

/**
 * The summary table of a report: one row per system, ratios against the baseline, and in the notes the targets that
 * apply to the workload (reproduction.ts: Seer's on rollout workloads, ThunderAgent's on its own two), each
 * evaluated on this run or naming the systems it needs.
 */
export function simSummaryTable(report: SimReport): BenchTable {
  const oracle = report.systems.find((s) => s.system === "oracle");
  // What a step and the tail count: requests of a rollout workload; model calls and programs of agents and replays.
  const rollout = report.workload.kind === "rollout";
  return {
    title: `arbor sim ${report.workload.name} (seed ${report.seed}, scale ${String(report.workload.scale.runScale ?? 1)}): ratios against ${report.baseline}`,
    columns: ["system", "iteration (s)", "tokens/s", "steps/min", "tail (s)", "p99 (s)", "preemptions", "recomputed tok", "peak KV", "speedup ×", "tail change", "of oracle"],
    rows: report.systems.map((s, i) => {
      const r = report.ratios[i];
      return [
        s.system,
        s.summary.iterationMs / 1000,
        s.summary.throughputTokensPerS,
        s.summary.stepsPerMin,
        s.summary.tailMs / 1000,
        s.summary.p99Ms / 1000,
        s.summary.preemptions,
        s.summary.recomputedTokens,
        s.summary.peakKvUsage,
        r?.speedup ?? "—",
        r === undefined ? "—" : tailChange(r.tailReduction),
        oracle === undefined || s.summary.iterationMs === 0 ? "—" : oracle.summary.iterationMs / s.summary.iterationMs,
      ];
    }),
    notes: [
      ...targetRows(report.workload).map((row) => `target: ${targetLine(row, [report])}`),
      `iteration = first placement to last finish; steps/min = ${rollout ? "requests" : "model calls"} per simulated minute; tail = the last 10% of ${rollout ? "requests" : "programs"}, its change against ${report.baseline} negative where shorter; of oracle = oracle iteration / system iteration`,
      ...report.systems.map((s) => `${s.system}: ${s.description}`),
    ],
  };
}

/** Run `arbor sim`; returns the report (also written to <out>/report.json). */
export async function simCommand(workload: string, o: SimCommandOptions): Promise<SimReport> {
  const scenario = await getScenario(workload);
  const { report, files } = await runSeed(scenario, o.seed, { ...o, workload, out: o.out ?? join(".arbor", "sim", `${scenario.info.name}-${o.seed}`) });
  if (o.json) console.log(JSON.stringify(report));
  else console.log(formatTable(simSummaryTable(report)));
  console.error(`arbor sim: wrote ${files.join(", ")}`);
  return report;
}

/** The systems `o` names, or every system of the scenario. */
function simSystems(scenario: SimScenario, o: Pick<SimCommandOptions, "systems">): string[] {
  return o.systems === undefined ? [...scenario.systems] : o.systems.split(",").map((s) => s.trim()).filter((s) => s.length > 0);
}

/**
 * One seed of `arbor sim`: run every system (a progress line each on stderr), write the report's files into
 * `o.out`, and return the report with the paths written. A failure names the seed and scale.
 */
export async function runSeed(
  scenario: SimScenario,
  seed: number,
  /** `workload`: the name or file the scenario was loaded from (what a worker thread loads it from again). */
  o: Omit<SimCommandOptions, "seed"> & { out: string; workload: string },
): Promise<{ report: SimReport; files: string[] }> {
  // Before the systems run: a folder that cannot be one must not cost a whole simulation.
  makeOutputDir(o.out, "--out");
  let report: SimReport;
  const progress = simProgress(scenario.info.name, o.progress === true);
  try {
    report = await runSim(scenario, {
      systems: simSystems(scenario, o),
      seed,
      scale: o.scale,
      jobs: o.jobs ?? 1,
      runSystem: async (system: string, ro: SimRunOptions, signal: AbortSignal) => (await runSystemInWorker(o.workload, system, ro, signal, workerHeapMb(o.jobs ?? 1))).result,
      onProgress: (system, r) => progress.system(system, r),
      onAdvance: (system, done, total) => progress.advance(system, done, total),
    });
  } catch (e) {
    // Every failure names its seed, so it can be run again exactly.
    if (e instanceof ArborError) throw new ArborError(`${e.message} (sim ${scenario.info.name}, seed ${seed}, scale ${o.scale})`, e.code);
    throw new Error(`${e instanceof Error ? e.message : String(e)} (sim ${scenario.info.name}, seed ${seed}, scale ${o.scale})`, { cause: e });
  } finally {
    progress.stop();
  }
  // The renderer (main.ts hands it over) writes report.json with the HTML and PNG; without one, the JSON alone.
  if (o.writeReportFiles !== undefined) return { report, files: await o.writeReportFiles(report, o.out) };
  const jsonPath = join(o.out, "report.json");
  await writeFile(jsonPath, `${JSON.stringify(report, null, 2)}\n`);
  return { report, files: [jsonPath] };
}
