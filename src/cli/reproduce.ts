// `arbor sim --reproduction`: runs every workload of the reproduction plan with the systems its rows need, writes
// each report beside the others (`<out dir>/<workload>/report.json` and its HTML), and regenerates
// `docs/reproduction.md` from them and the attribution notes (`docs/reproduction-notes.yaml`). See reproduction.ts.
// Over several seeds (`--seeds`), every workload runs once per seed (`<out dir>/<workload>/seed-<n>/`) and the table
// gives each figure's mean and range.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "../core/zod.js";
import { ArborError } from "../core/errors.js";
import { getScenario } from "../sim/scenario/registry.js";
import type { SimReport } from "../sim/scenario/sim-report.js";
import { parseSimReport } from "./report/read-sim-report.js";
import { REPRODUCTION_PLAN, reproductionMarkdown, unattributedRows } from "./reproduction.js";
import { formatSeedList } from "./sim-seeds.js";
import { simCommand, type SimReportWriter } from "./sim.js";

/** Runs one workload's systems into a report (the `arbor sim` command's work), and writes its files. */
export type RunWorkload = (workload: string, systems: readonly string[], o: { seed: number; scale: number }) => Promise<SimReport>;

export interface ReproduceOptions {
  /** Every workload runs once per seed (at least one), in this order. */
  seeds: readonly number[];
  scale: number;
  /** The document to write (default docs/reproduction.md). */
  doc: string;
  /** The attribution notes (default docs/reproduction-notes.yaml); a missing file is no notes. */
  notes: string;
  /** Only these workloads of the plan (default all). */
  workloads?: readonly string[];
  /** Where each workload's report files go: <out>/<workload>/, or <out>/<workload>/seed-<n>/ over several seeds (default .arbor/sim/reproduction). */
  out?: string;
  /** Systems of a workload run at once, each in a worker thread (default 1). */
  jobs?: number;
  writeReportFiles?: SimReportWriter;
  /** Read a workload's report from <out>/<workload>/report.json when one of the same seed and scale is there. */
  reuse?: boolean;
  log: (line: string) => void;
}

/**
 * The plan's runner: `arbor sim <workload>` with the systems the plan names that the workload has (a system a
 * row needs and the workload lacks is left out, and its rows read "not run").
 */
export function simRunner(o: Pick<ReproduceOptions, "out" | "jobs" | "writeReportFiles" | "reuse" | "log"> & { perSeed?: boolean }): RunWorkload {
  return async (workload, systems, so) => {
    const scenario = await getScenario(workload);
    const have = systems.filter((s) => scenario.systems.includes(s));
    const out = join(o.out ?? join(".arbor", "sim", "reproduction"), workload, ...(o.perSeed === true ? [`seed-${so.seed}`] : []));
    const previous = o.reuse ? reusable(join(out, "report.json"), have, so) : undefined;
    if (previous) {
      o.log(`reproduction: ${workload}: the report in ${out} (same seed, scale and systems)`);
      return previous;
    }
    return simCommand(workload, { systems: have.join(","), ...so, out, ...(o.jobs !== undefined ? { jobs: o.jobs } : {}), ...(o.writeReportFiles ? { writeReportFiles: o.writeReportFiles } : {}) });
  };
}

const Notes = z.record(z.string().regex(/^[a-z0-9-]+\/[a-z0-9*-]+$/, "a row id: <workload>/<figure>"), z.string().min(1));

/** Read the attribution notes: a YAML map of row id → text. */
export function loadReproductionNotes(path: string): Record<string, string> {
  if (!existsSync(path)) return {};
  const parsed = Notes.safeParse(parseYaml(readFileSync(path, "utf8")) ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    // A bad key's reason is nested one level down (zod's invalid_key).
    const reason = issue && "issues" in issue && Array.isArray(issue.issues) && issue.issues[0] ? (issue.issues[0] as { message: string }).message : issue?.message;
    throw new ArborError(`${path}: ${issue?.path.join(".") || "(top)"}: ${reason ?? "invalid"}`, "config");
  }
  return parsed.data;
}

/** A report written before with the same seed, scale and systems, or undefined. */
function reusable(path: string, systems: readonly string[], o: { seed: number; scale: number }): SimReport | undefined {
  if (!existsSync(path)) return undefined;
  const r = parseSimReport(readFileSync(path, "utf8"), path);
  const same = r.seed === o.seed && Number(r.workload.scale.runScale ?? 1) === o.scale && r.systems.map((s) => s.system).join() === systems.join();
  return same ? r : undefined;
}

/** Run the plan and write the document; answers the rows that miss their target without an attribution. */
export async function reproduceCommand(o: ReproduceOptions, run: RunWorkload = simRunner({ ...o, perSeed: o.seeds.length > 1 })): Promise<string[]> {
  if (o.seeds.length === 0) throw new ArborError("--seeds names no seed", "config");
  const notes = loadReproductionNotes(o.notes);
  const names = o.workloads ?? Object.keys(REPRODUCTION_PLAN);
  for (const w of names) if (!REPRODUCTION_PLAN[w]) throw new ArborError(`--workloads: '${w}' is not in the reproduction plan (${Object.keys(REPRODUCTION_PLAN).join(", ")})`, "config");
  const reports = new Map<string, SimReport[]>();
  const seedOption = o.seeds.length === 1 ? `--seed ${o.seeds[0]}` : `--seeds ${formatSeedList(o.seeds)}`;
  const command = `arbor sim --reproduction ${seedOption}${o.scale !== 1 ? ` --scale ${o.scale}` : ""}`;
  mkdirSync(dirname(o.doc), { recursive: true });
  for (const [i, w] of names.entries()) {
    o.log(`reproduction: ${i + 1}/${names.length} ${w} (${(REPRODUCTION_PLAN[w] ?? []).join(", ")})`);
    const runs: SimReport[] = [];
    for (const seed of o.seeds) {
      if (o.seeds.length > 1) o.log(`reproduction: ${w}: seed ${seed} (${runs.length + 1}/${o.seeds.length})`);
      runs.push(await run(w, REPRODUCTION_PLAN[w] ?? [], { seed, scale: o.scale }));
    }
    reports.set(w, runs);
    // Written after every workload: a long run cut short still leaves the rows it finished (the rest "not run").
    writeFileSync(o.doc, reproductionMarkdown(reports, notes, { command, seeds: o.seeds, scale: o.scale }));
  }
  o.log(`reproduction: wrote ${o.doc}`);
  const missing = unattributedRows(reports, notes);
  for (const id of missing) o.log(`reproduction: row ${id} misses its target and has no attribution in ${o.notes}`);
  return missing;
}
