// A SimReport as `report.json` text: 2-space JSON with every object's keys in one fixed order (the fields of
// sim-report.ts in the order they are declared there, `format` first; map keys such as engine names sorted), so
// the same report always gives the same bytes whichever code built the object and in what order it set fields.
import type { SimReport } from "../../sim/scenario/sim-report.js";

// Declared order of each object's fields (sim-report.ts). Keys not listed (a field added later) follow, sorted.
const REPORT = ["format", "workload", "seed", "baseline", "systems", "ratios"];
const WORKLOAD = ["name", "kind", "description", "sources", "scale"];
const SYSTEM = ["system", "description", "summary", "series", "completionPercentilesMs"];
const SUMMARY = [
  "requests",
  "completed",
  "aborted",
  "programs",
  "makespanMs",
  "iterationMs",
  "outputTokens",
  "throughputTokensPerS",
  "stepsPerMin",
  "tailMs",
  "p50Ms",
  "p90Ms",
  "p99Ms",
  "preemptions",
  "recomputedTokens",
  "peakKvUsage",
  "meanStaleness",
];
const SERIES = ["throughput", "kvUsage", "preemptions", "recomputedTokens", "staleness"];
const POINT = ["tMs", "value"];
const RATIO = ["system", "speedup", "throughput", "tailReduction"];

type Json = unknown;

/** `o`'s own keys: those of `order` present first, in that order, then the rest sorted. */
function ordered(o: Record<string, Json>, order: readonly string[], inner: (key: string, v: Json) => Json = (_, v) => v): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const k of order) if (Object.hasOwn(o, k)) out[k] = inner(k, o[k]);
  for (const k of Object.keys(o).filter((x) => !order.includes(x)).sort()) out[k] = inner(k, o[k]);
  return out;
}

const isObject = (v: Json): v is Record<string, Json> => typeof v === "object" && v !== null && !Array.isArray(v);
const points = (v: Json): Json => (Array.isArray(v) ? v.map((p) => (isObject(p) ? ordered(p, POINT) : p)) : v);
const sortedMap = (v: Json, each: (v: Json) => Json): Json => (isObject(v) ? ordered(v, [], (_, x) => each(x)) : v);

function series(v: Json): Json {
  if (!isObject(v)) return v;
  return ordered(v, SERIES, (k, x) => (k === "kvUsage" ? sortedMap(x, points) : points(x)));
}

function system(v: Json): Json {
  if (!isObject(v)) return v;
  return ordered(v, SYSTEM, (k, x) => (k === "summary" && isObject(x) ? ordered(x, SUMMARY) : k === "series" ? series(x) : x));
}

/** The report as `report.json` text (stable key order, 2-space indent, a final newline). */
export function simReportJson(report: SimReport): string {
  const o = ordered(report as unknown as Record<string, Json>, REPORT, (k, v) => {
    if (k === "workload" && isObject(v)) return ordered(v, WORKLOAD, (wk, wv) => (wk === "scale" ? sortedMap(wv, (x) => x) : wv));
    if (k === "systems" && Array.isArray(v)) return v.map(system);
    if (k === "ratios" && Array.isArray(v)) return v.map((r) => (isObject(r) ? ordered(r, RATIO) : r));
    return v;
  });
  return `${JSON.stringify(o, null, 2)}\n`;
}
