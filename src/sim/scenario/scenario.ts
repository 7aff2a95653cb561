// What `arbor sim` runs: a workload (its figures and sources) and the named systems it can be run under.
// Every workload kind (rollout, agent, replay) gives one of these, so the command, the report and the
// reproduction table treat them alike.
import type { SimSystemResult, SimWorkloadInfo } from "./sim-report.js";

/** Options of one run: the seed of every random draw, and the scale (1 = the workload as written). */
export interface SimRunOptions {
  seed: number;
  /** Fraction of the workload's requests (or programs) and engines to run, e.g. 0.02 in a test; 1 = full scale. */
  scale: number;
}

/** A workload with the systems it can run under; `run` is deterministic for its system and options. */
export interface SimScenario {
  info: SimWorkloadInfo;
  systems: readonly string[];
  run(system: string, o: SimRunOptions): Promise<SimSystemResult>;
}
