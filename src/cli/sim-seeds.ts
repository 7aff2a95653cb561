// `arbor sim <workload> --seeds 1-5`: the same run as `arbor sim` once per seed (each seed's report in
// <out>/seed-<n>/, exactly what `--seed <n>` writes), then each system's figures over the seeds — mean, standard
// deviation and range of its iteration time and speedup, and `arbor` over the best other system per seed — printed
// as a table and written to <out>/seeds.json.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { BenchTable } from "../bench/bench.js";
import { formatTable } from "../bench/format-table.js";
import { ArborError } from "../core/errors.js";
import { getScenario } from "../sim/scenario/registry.js";
import { summarizeSeeds, type SeedSummary } from "../sim/scenario/seed-summary.js";
import type { SimReport } from "../sim/scenario/sim-report.js";
import { targetLine, targetRows } from "./reproduction.js";
import { runSeed, type SimCommandOptions } from "./sim.js";

/** Seeds one `--seeds` may name: each is a full run of every system. */
export const MAX_SEEDS = 100;

/**
 * Parse `--seeds`: comma-separated integers and inclusive ranges (`1-5`, `1,4,9`, `1-3,10`), in the order given.
 * Throws an ArborError naming `--seeds` for anything else, a repeated seed, or more than {@link MAX_SEEDS}.
 */
export function parseSeedList(text: string): number[] {
  const seeds: number[] = [];
  for (const part of text.split(",").map((p) => p.trim())) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (m === null) throw new ArborError(`--seeds: '${part}' is not a seed (an integer >= 0) or a range of seeds like 1-5`, "config");
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) throw new ArborError(`--seeds: the range ${part} ends before it starts`, "config");
    if (seeds.length + (to - from + 1) > MAX_SEEDS) throw new ArborError(`--seeds: at most ${MAX_SEEDS} seeds, got more in '${text}'`, "config");
    for (let s = from; s <= to; s++) {
      if (seeds.includes(s)) throw new ArborError(`--seeds: seed ${s} is named twice in '${text}'`, "config");
      seeds.push(s);
    }
  }
  return seeds;
}

/** `seeds` as `--seeds` takes them, runs of consecutive seeds as ranges: [1, 2, 3, 7] → "1-3,7". */
export function formatSeedList(seeds: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < seeds.length; ) {
    let j = i;
    while (j + 1 < seeds.length && (seeds[j + 1] as number) === (seeds[j] as number) + 1) j++;
    parts.push(j === i ? `${seeds[i]}` : `${seeds[i]}-${seeds[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

/** The across-seeds table: one row per system, its figures over the seeds; `targets`: the workload's target lines. */
export function seedSummaryTable(s: SeedSummary, targets: readonly string[] = []): BenchTable {
  const sec = (ms: number): number => ms / 1000;
  const best = s.arborOverBest;
  const figure = s.kind === "rollout" ? "iteration time" : "agent steps/min";
  return {
    title: `arbor sim ${s.workload} over seeds ${s.seeds.join(", ")} (scale ${s.scale}): ratios against ${s.baseline}`,
    columns: ["system", "iteration mean (s)", "sd (s)", "min (s)", "max (s)", "steps/min mean", "speedup × mean", "speedup × min", "speedup × max"],
    rows: s.systems.map((x) => [x.system, sec(x.iterationMs.mean), sec(x.iterationMs.sd), sec(x.iterationMs.min), sec(x.iterationMs.max), x.stepsPerMin.mean, x.speedup.mean, x.speedup.min, x.speedup.max]),
    notes: [
      ...targets.map((t) => `target: ${t}`),
      ...(best === undefined
        ? []
        : [
            `arbor over the best other system (${figure}), per seed: ${best.values.map((v) => `${v.toFixed(3)}×`).join(", ")}; mean ${best.mean.toFixed(3)}× ± ${best.sd.toFixed(3)} (sd); ` +
              `at least the best in ${best.values.filter((v) => v >= 1).length} of ${best.values.length} seeds`,
          ]),
      "each seed draws its own requests or programs (lengths, tool times); sd = sample standard deviation over the seeds",
    ],
  };
}

/** Run `arbor sim --seeds`; returns the summary (also written to <out>/seeds.json). */
export async function simSeedsCommand(workload: string, o: Omit<SimCommandOptions, "seed"> & { seeds: readonly number[] }): Promise<SeedSummary> {
  if (o.seeds.length === 0) throw new ArborError("--seeds names no seed", "config");
  const scenario = await getScenario(workload);
  const outDir = o.out ?? join(".arbor", "sim", `${scenario.info.name}-seeds`);
  const reports: SimReport[] = [];
  for (const seed of o.seeds) {
    console.error(`arbor sim ${scenario.info.name}: seed ${seed} (${reports.length + 1}/${o.seeds.length})`);
    const { report, files } = await runSeed(scenario, seed, { ...o, workload, out: join(outDir, `seed-${seed}`) });
    console.error(`arbor sim: seed ${seed}: wrote ${files.join(", ")}`);
    reports.push(report);
  }
  const summary = summarizeSeeds(reports);
  const path = join(outDir, "seeds.json");
  await writeFile(path, `${JSON.stringify(summary, null, 2)}\n`);
  if (o.json) console.log(JSON.stringify(summary));
  else console.log(formatTable(seedSummaryTable(summary, targetRows(scenario.info).map((row) => targetLine(row, reports)))));
  console.error(`arbor sim: wrote ${path}`);
  return summary;
}
