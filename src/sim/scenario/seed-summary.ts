// `arbor sim --seeds`: one workload's reports under several seeds, summed up per system. A single seed draws one
// set of requests or programs, and a ratio of a few percent between two systems can be that draw's luck (search-agent
// at full scale: arbor 0.99× sglang-router with seed 1, 1.01× and 1.02× with seeds 2 and 3), so a claim that one
// system beats another rests on the spread over seeds, not on one run.
import { ArborError } from "../../core/errors.js";
import { mean, sampleVariance } from "../../loop/held-out-stats.js";
import { arborOverBest } from "./arbor-over-best.js";
import type { SimReport, SimSummary, SimSystemResult } from "./sim-report.js";

/** Format tag of `seeds.json`. Bump on an incompatible change. */
export const SEED_SUMMARY_FORMAT = "arbor-sim-seeds/1";

/** One figure over the seeds: each seed's value (in seed order), their mean, sample standard deviation and range. */
export interface SeedSpread {
  values: number[];
  mean: number;
  /** Sample standard deviation (n − 1); 0 with one seed. */
  sd: number;
  min: number;
  max: number;
}

/** One system over the seeds. */
export interface SeedSystemSummary {
  system: string;
  iterationMs: SeedSpread;
  stepsPerMin: SeedSpread;
  tailMs: SeedSpread;
  /** Speedup over the baseline (baseline iteration time / this system's), per seed. */
  speedup: SeedSpread;
}

export interface SeedSummary {
  format: typeof SEED_SUMMARY_FORMAT;
  workload: string;
  kind: SimReport["workload"]["kind"];
  /** The scale every seed ran at. */
  scale: number;
  baseline: string;
  seeds: number[];
  systems: SeedSystemSummary[];
  /** `arbor` over the best other system, per seed (agent steps/min or iteration time); absent without `arbor` and another system. */
  arborOverBest?: SeedSpread;
}

/** The spread of `values` (at least one). */
export function seedSpread(values: readonly number[]): SeedSpread {
  if (values.length === 0) throw new ArborError("seed summary: no values", "internal");
  return { values: [...values], mean: mean(values), sd: Math.sqrt(sampleVariance(values)), min: Math.min(...values), max: Math.max(...values) };
}

/**
 * Checks that `reports` (one per seed, at least one) are runs of the same workload, baseline, systems (in the same
 * order) and scale, whose figures can be compared or averaged; returns the first. Throws an "internal" ArborError
 * naming `what` and the seed that differs.
 */
export function checkSameRun(reports: readonly SimReport[], what: string): SimReport {
  const first = reports[0];
  if (first === undefined) throw new ArborError(`${what}: no report`, "internal");
  const names = first.systems.map((s) => s.system).join(",");
  const scale = Number(first.workload.scale.runScale ?? 1);
  for (const r of reports) {
    const same = r.workload.name === first.workload.name && r.baseline === first.baseline && Number(r.workload.scale.runScale ?? 1) === scale;
    if (!same || r.systems.map((s) => s.system).join(",") !== names) {
      throw new ArborError(`${what}: the report of seed ${r.seed} is not of the same workload, systems and scale as seed ${first.seed}'s`, "internal");
    }
  }
  return first;
}

/**
 * Sum up `reports`, one per seed of the same workload, systems (in the same order) and scale; throws when they
 * differ, since their figures would not be comparable.
 */
export function summarizeSeeds(reports: readonly SimReport[]): SeedSummary {
  const first = checkSameRun(reports, "seed summary");
  const names = first.systems.map((s) => s.system);
  const scale = Number(first.workload.scale.runScale ?? 1);
  const systems = names.map((system, i) => {
    const summary = (r: SimReport): SimSummary => (r.systems[i] as SimSystemResult).summary;
    return {
      system,
      iterationMs: seedSpread(reports.map((r) => summary(r).iterationMs)),
      stepsPerMin: seedSpread(reports.map((r) => summary(r).stepsPerMin)),
      tailMs: seedSpread(reports.map((r) => summary(r).tailMs)),
      speedup: seedSpread(reports.map((r) => r.ratios[i]?.speedup ?? 0)),
    };
  });
  // Replays run agent programs too: their figure is steps per minute, as an agent workload's.
  const agent = first.workload.kind !== "rollout";
  const best = reports.map((r) => arborOverBest(r, agent));
  const out: SeedSummary = { format: SEED_SUMMARY_FORMAT, workload: first.workload.name, kind: first.workload.kind, scale, baseline: first.baseline, seeds: reports.map((r) => r.seed), systems };
  if (best.every((v) => v !== undefined)) out.arborOverBest = seedSpread(best as number[]);
  return out;
}
