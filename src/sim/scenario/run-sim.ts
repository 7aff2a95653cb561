// One `arbor sim` run: the scenario under each requested system (one after another, or `jobs` at a time
// through a runner that puts each in a thread of its own), then the ratios against the baseline (`verl-like`
// when it ran, else the first system), as one SimReport: the same report whatever the order they finish in.
import { ArborError } from "../../core/errors.js";
import { checkRunOptions, type SimRunOptions, type SimScenario } from "./scenario.js";
import { SIM_REPORT_FORMAT, type SimRatio, type SimReport, type SimSystemResult } from "./sim-report.js";

export interface RunSimOptions {
  systems: readonly string[];
  seed: number;
  scale: number;
  /** Told when a system starts and when it finished (with its result). */
  onProgress?: (system: string, result?: SimSystemResult) => void;
  /** Told as a system's run advances (SimRunOptions.onAdvance): a progress display. */
  onAdvance?: (system: string, done: number, total: number) => void;
  /**
   * Systems run at once (default 1). More than one (and more than one system) runs each through `runSystem`,
   * since a scenario's run holds its thread; one runs `scenario.run` here.
   */
  jobs?: number;
  /**
   * Runs one system elsewhere (a worker thread: worker-run.ts); default `scenario.run` in this thread. When
   * one system fails, `signal` aborts the others (a runner stops them and rejects).
   */
  runSystem?: (system: string, o: SimRunOptions, signal: AbortSignal) => Promise<SimSystemResult>;
}

/** Most systems `--jobs` may run at once (each is a thread with a heap of its own). */
export const MAX_SIM_JOBS = 64;

/** The figures of `r` against `base`. */
export function simRatio(base: SimSystemResult, r: SimSystemResult): SimRatio {
  const b = base.summary;
  const s = r.summary;
  return {
    system: r.system,
    speedup: s.iterationMs === 0 ? 0 : b.iterationMs / s.iterationMs,
    throughput: b.throughputTokensPerS === 0 ? 0 : s.throughputTokensPerS / b.throughputTokensPerS,
    tailReduction: b.tailMs === 0 ? 0 : 1 - s.tailMs / b.tailMs,
  };
}

/** Run `scenario` under each system; an unknown or repeated system, a bad scale or seed is refused before anything runs. */
export async function runSim(scenario: SimScenario, o: RunSimOptions): Promise<SimReport> {
  checkRunOptions(o);
  if (o.systems.length === 0) throw new ArborError("sim: --systems names no system", "config");
  for (const s of o.systems) {
    if (!scenario.systems.includes(s)) throw new ArborError(`sim: workload ${scenario.info.name} has no system '${s}' (known: ${scenario.systems.join(", ")})`, "config");
  }
  if (new Set(o.systems).size !== o.systems.length) throw new ArborError(`sim: --systems repeats a system (${o.systems.join(",")})`, "config");
  const jobs = o.jobs ?? 1;
  if (!(Number.isInteger(jobs) && jobs >= 1 && jobs <= MAX_SIM_JOBS)) throw new ArborError(`sim: --jobs must be an integer from 1 to ${MAX_SIM_JOBS}, got ${jobs}`, "config");
  const lanes = Math.min(jobs, o.systems.length);
  // One system at a time runs in this thread (no thread to start); more need the runner.
  if (lanes > 1 && o.runSystem === undefined) throw new ArborError("sim: --jobs above 1 needs a runner that runs systems in threads of their own", "config");
  const run = lanes > 1 && o.runSystem !== undefined ? o.runSystem : (system: string, ro: SimRunOptions) => scenario.run(system, ro);
  const results = new Array<SimSystemResult>(o.systems.length);
  let next = 0;
  // The first failure; the systems still running are aborted and no other starts.
  let failure: { error: unknown } | undefined;
  const stop = new AbortController();
  // `jobs` lanes, each taking the next system when its last one ends; results stay in the systems' order.
  const lane = async (): Promise<void> => {
    while (next < o.systems.length && failure === undefined) {
      const i = next++;
      const s = o.systems[i] as string;
      o.onProgress?.(s);
      try {
        const onAdvance = o.onAdvance;
        results[i] = await run(s, { seed: o.seed, scale: o.scale, ...(onAdvance === undefined ? {} : { onAdvance: (done: number, total: number) => onAdvance(s, done, total) }) }, stop.signal);
      } catch (error) {
        failure ??= { error };
        stop.abort();
        return;
      }
      o.onProgress?.(s, results[i]);
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  if (failure !== undefined) throw failure.error;
  const base = results.find((r) => r.system === "verl-like") ?? (results[0] as SimSystemResult);
  // The figures of the run made, not the workload's full scale (the description states that one).
  const info = { ...scenario.info, scale: { ...(await scenario.scaleAt(o.scale)), runScale: o.scale } };
  return { format: SIM_REPORT_FORMAT, workload: info, seed: o.seed, baseline: base.system, systems: results, ratios: results.map((r) => simRatio(base, r)) };
}
