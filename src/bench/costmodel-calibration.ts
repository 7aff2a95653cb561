// Engine benchmark (a): the cost model's step times and throughput beside the published reference
// points each profile was calibrated from, one table per shipped profile.
import { calibrationTable } from "../engine/costmodel/calibration.js";
import { COST_PROFILES } from "../engine/costmodel/profile.js";
import type { BenchTable } from "./bench.js";

/** One calibration table per cost profile. */
export function costModelCalibration(): BenchTable[] {
  return Object.values(COST_PROFILES).map((profile) => ({
    title: `(a) cost model ${profile.name}: prediction vs published reference`,
    columns: ["case", "unit", "reference", "model", "error %", "source"],
    rows: calibrationTable(profile).map((r) => [
      r.case,
      r.unit,
      r.reference ? r.reference.value : "—",
      r.model,
      r.errorPct === undefined ? "—" : `${r.errorPct >= 0 ? "+" : ""}${r.errorPct.toFixed(1)}`,
      r.reference?.source ?? "model only (the curve between reference points)",
    ]),
  }));
}
