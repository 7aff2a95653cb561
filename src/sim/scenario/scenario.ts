// What `arbor sim` runs: a workload (its figures and sources) and the named systems it can be run under.
// Every workload kind (rollout, agent, replay) gives one of these, so the command, the report and the
// reproduction table treat them alike.
import { ArborError } from "../../core/errors.js";
import type { SimSystemResult, SimWorkloadInfo } from "./sim-report.js";

/** Options of one run: the seed of every random draw, and the scale (1 = the workload as written). */
export interface SimRunOptions {
  seed: number;
  /** Fraction of the workload's requests (or programs) and engines to run, e.g. 0.02 in a test; 1 = full scale. */
  scale: number;
  /**
   * Told as the run advances: requests (rollout) or programs (agent, replay) finished, of the run's total. For a
   * progress display only: it changes nothing in the run (the report is the same with or without it).
   */
  onAdvance?: (done: number, total: number) => void;
}

/** Refuse options no scenario runs (a "config" ArborError naming the field): a scale in (0, 1] and an integer seed. */
export function checkRunOptions(o: Pick<SimRunOptions, "seed" | "scale">): void {
  if (!(o.scale > 0 && o.scale <= 1)) throw new ArborError(`sim: scale must be in (0, 1], got ${o.scale}`, "config");
  if (!Number.isSafeInteger(o.seed)) throw new ArborError(`sim: seed must be an integer, got ${o.seed}`, "config");
}

/** A count at `scale` (1 = full; checked by the run, checkRunOptions), at least 1: engines, prompts, programs. */
export function scaled(n: number, scale: number): number {
  return Math.max(1, Math.round(n * scale));
}

/** A workload with the systems it can run under; `run` is deterministic for its system and options. */
export interface SimScenario {
  /** The workload as written: its figures (`scale`) are those of a full-scale run. */
  info: SimWorkloadInfo;
  systems: readonly string[];
  run(system: string, o: SimRunOptions): Promise<SimSystemResult>;
  /**
   * The scale figures of a run at `scale` (engines, GPUs, requests or programs as `run` makes them, the rest as
   * written): what a report states. At 1, `info.scale`'s figures.
   */
  scaleAt(scale: number): Promise<Record<string, number | string>>;
}
