// "arbor at least the best of them" (issue 18): the `arbor` system's headline figure over the best other
// system's in one report. Shared by the reproduction table and the across-seeds summary of `arbor sim`.
import type { SimReport } from "./sim-report.js";

/**
 * `arbor`'s headline figure over the best other system's (≥ 1: at least the best of them): agent steps per
 * minute on agent workloads (`agent` true), iteration time otherwise. The oracle is not a system one can
 * run, so it is left out. Undefined when the report has no `arbor` or no other system.
 */
export function arborOverBest(r: SimReport, agent: boolean): number | undefined {
  const arbor = r.systems.find((s) => s.system === "arbor");
  const others = r.systems.filter((s) => s.system !== "arbor" && s.system !== "oracle");
  if (!arbor || others.length === 0) return undefined;
  if (agent) return arbor.summary.stepsPerMin / Math.max(...others.map((s) => s.summary.stepsPerMin));
  return Math.min(...others.map((s) => s.summary.iterationMs)) / arbor.summary.iterationMs;
}
