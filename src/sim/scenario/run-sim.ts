// One `arbor sim` run: the scenario under each requested system, in order, then the ratios against the
// baseline (`verl-like` when it ran, else the first system), as one SimReport.
import { ArborError } from "../../core/errors.js";
import type { SimScenario } from "./scenario.js";
import { SIM_REPORT_FORMAT, type SimRatio, type SimReport, type SimSystemResult } from "./sim-report.js";

export interface RunSimOptions {
  systems: readonly string[];
  seed: number;
  scale: number;
  /** Told when a system starts and when it finished (with its result). */
  onProgress?: (system: string, result?: SimSystemResult) => void;
}

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

/** Run `scenario` under each system; an unknown or repeated system is refused before anything runs. */
export async function runSim(scenario: SimScenario, o: RunSimOptions): Promise<SimReport> {
  if (o.systems.length === 0) throw new ArborError("sim: --systems names no system", "config");
  for (const s of o.systems) {
    if (!scenario.systems.includes(s)) throw new ArborError(`sim: workload ${scenario.info.name} has no system '${s}' (known: ${scenario.systems.join(", ")})`, "config");
  }
  if (new Set(o.systems).size !== o.systems.length) throw new ArborError(`sim: --systems repeats a system (${o.systems.join(",")})`, "config");
  const results: SimSystemResult[] = [];
  for (const s of o.systems) {
    o.onProgress?.(s);
    const r = await scenario.run(s, { seed: o.seed, scale: o.scale });
    results.push(r);
    o.onProgress?.(s, r);
  }
  const base = results.find((r) => r.system === "verl-like") ?? (results[0] as SimSystemResult);
  const info = { ...scenario.info, scale: { ...scenario.info.scale, runScale: o.scale } };
  return { format: SIM_REPORT_FORMAT, workload: info, seed: o.seed, baseline: base.system, systems: results, ratios: results.map((r) => simRatio(base, r)) };
}
