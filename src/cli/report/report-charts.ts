// The plots of a SimReport as Vega-Lite specifications (rendered to SVG by vega-svg.ts): throughput over time,
// KV usage per engine (small multiples, one per system), the completion CDF with the tail (last 10%) shaded and
// each system's 90th percentile marked, preemptions and recomputed tokens, and staleness when a system has any.
// Data are inlined (no URLs), so the SVG needs nothing from the network. A plot with nothing to draw is left out
// and `notes` says why, so an empty frame never passes for a measured zero; systems whose lines are the same are
// named in the plot's subtitle (the last one drawn hides the others, and a legend entry without a line looks lost).
import type { TopLevelSpec } from "vega-lite";
import type { SeriesPoint, SimReport } from "../../sim/scenario/sim-report.js";

/** One plot of the report. */
export interface ReportChart {
  /** Stable id (`throughput`, `kv-usage`, `completion-cdf`, `preemptions`, `staleness`), used as the HTML anchor. */
  id: string;
  title: string;
  spec: TopLevelSpec;
}

/** The plots, and a note for each plot (or part of one) left out for want of data. */
export interface ReportCharts {
  charts: ReportChart[];
  notes: string[];
}

/** Engines drawn in one KV panel before the legend is dropped (64 engines would fill the page with legend). */
const MAX_KV_LEGEND = 12;
const WIDTH = 620;
const HEIGHT = 240;
const TIME_AXIS = { title: "time since start (s)" };

const seconds = (ms: number): number => ms / 1000;
const rows = (system: string, ps: readonly SeriesPoint[]) => ps.map((p) => ({ system, t: seconds(p.tMs), value: p.value }));

/** What one point of the completion CDF counts: samples for rollouts, programs for agents and real runs. */
export function completionUnit(report: SimReport): string {
  return report.workload.kind === "rollout" ? "requests" : "programs";
}

/** The plots of `report`. */
export function reportCharts(report: SimReport): ReportCharts {
  const names = report.systems.map((s) => s.system);
  // One color per system in every plot, in the report's order.
  const color = { field: "system", type: "nominal", title: "system", scale: { domain: names } } as const;
  const charts: ReportChart[] = [];
  const notes: string[] = [];

  const line = (title: string, id: string, yTitle: string, pick: (s: SimReport["systems"][number]) => readonly SeriesPoint[]): ReportChart => ({
    id,
    title,
    spec: {
      description: title,
      title: withSameLines(title, [], sameLines(report, pick)),
      width: WIDTH,
      height: HEIGHT,
      data: { values: report.systems.flatMap((s) => rows(s.system, pick(s))) },
      mark: { type: "line", interpolate: "linear", strokeWidth: 1.5 },
      encoding: { x: { field: "t", type: "quantitative", axis: TIME_AXIS }, y: { field: "value", type: "quantitative", axis: { title: yTitle } }, color },
    },
  });

  if (report.systems.some((s) => s.series.throughput.length > 0)) {
    charts.push(line("Throughput over time (whole cluster)", "throughput", "throughput (output tokens/s)", (s) => s.series.throughput));
  } else notes.push("Throughput over time: no system recorded a throughput series.");

  charts.push(...kvChart(report, notes));
  charts.push(cdfChart(report, color));

  const preempted = report.systems.some((s) => s.series.preemptions.length > 0 || s.series.recomputedTokens.length > 0);
  if (preempted) {
    const title = "Preemptions and recomputed tokens (cumulative)";
    const half = (t: string, yTitle: string, pick: (s: SimReport["systems"][number]) => readonly SeriesPoint[]) => ({
      title: t,
      width: WIDTH / 2 - 40,
      height: HEIGHT,
      data: { values: report.systems.flatMap((s) => rows(s.system, pick(s))) },
      mark: { type: "line" as const, strokeWidth: 1.5 },
      encoding: { x: { field: "t", type: "quantitative" as const, axis: TIME_AXIS }, y: { field: "value", type: "quantitative" as const, axis: { title: yTitle } }, color },
    });
    charts.push({
      id: "preemptions",
      title,
      spec: {
        description: title,
        title,
        hconcat: [half("Preemptions", "preemptions (count, cumulative)", (s) => s.series.preemptions), half("Recomputed tokens", "recomputed tokens (cumulative)", (s) => s.series.recomputedTokens)],
        resolve: { scale: { color: "shared" } },
      },
    });
  } else notes.push("Preemptions and recomputed tokens: no series recorded (no system reported any over time).");

  if (report.systems.some((s) => s.series.staleness.length > 0)) {
    charts.push(line("Staleness of trained batches (async rollout)", "staleness", "mean staleness (policy versions)", (s) => s.series.staleness));
  }
  return { charts, notes };
}

/** Small multiples: one panel per system that recorded KV usage, one line per engine, in % of its capacity. */
function kvChart(report: SimReport, notes: string[]): ReportChart[] {
  const withKv = report.systems.filter((s) => Object.values(s.series.kvUsage).some((ps) => ps.length > 0));
  const without = report.systems.filter((s) => !withKv.includes(s)).map((s) => s.system);
  if (without.length > 0) notes.push(`KV usage per engine: not recorded for ${without.join(", ")}.`);
  if (withKv.length === 0) return [];
  const engines = new Set(withKv.flatMap((s) => Object.keys(s.series.kvUsage)));
  const values = withKv.flatMap((s) =>
    Object.entries(s.series.kvUsage)
      .sort(([a], [b]) => a.localeCompare(b))
      .flatMap(([engine, ps]) => ps.map((p) => ({ system: s.system, engine, t: seconds(p.tMs), value: p.value * 100 }))),
  );
  const title = "KV-cache usage per engine over time";
  return [
    {
      id: "kv-usage",
      title,
      spec: {
        description: title,
        title,
        data: { values },
        columns: 2,
        facet: { field: "system", type: "nominal", title: null, sort: withKv.map((s) => s.system), header: { labelFontSize: 13, labelFontWeight: "bold" } },
        spec: {
          width: WIDTH / 2 - 40,
          height: 150,
          // Many engines: thinner, translucent lines, so the band they form shows where most of them are.
          mark: engines.size > MAX_KV_LEGEND ? { type: "line", strokeWidth: 0.6, opacity: 0.5 } : { type: "line", strokeWidth: 1 },
          encoding: {
            x: { field: "t", type: "quantitative", axis: TIME_AXIS },
            y: { field: "value", type: "quantitative", scale: { domain: [0, 100] }, axis: { title: "KV blocks in use (% of capacity)" } },
            color: { field: "engine", type: "nominal", title: "engine", legend: engines.size > MAX_KV_LEGEND ? null : {} },
          },
        },
      },
    },
  ];
}

/** The completion CDF: the band of the last 10% shaded and labelled, each system's 90th percentile a dashed rule. */
function cdfChart(report: SimReport, color: object): ReportChart {
  const unit = completionUnit(report);
  const title = `Completion CDF of ${unit} (tail: last 10% shaded)`;
  const cdf = report.systems.flatMap((s) => s.completionPercentilesMs.map((ms, i) => ({ system: s.system, t: seconds(ms), value: i / 100 })));
  const p90 = report.systems.map((s) => ({ system: s.system, t: seconds(s.completionPercentilesMs[90] ?? 0), tail: `${s.system}: tail ${fmtSeconds(s.summary.tailMs)}` }));
  const x = { field: "t", type: "quantitative", axis: TIME_AXIS } as const;
  return {
    id: "completion-cdf",
    title,
    spec: {
      description: title,
      title: withSameLines(title, [`tail (90th percentile → last): ${report.systems.map((s) => `${s.system} ${fmtSeconds(s.summary.tailMs)}`).join(", ")}`], sameLines(report, (s) => s.completionPercentilesMs)),
      width: WIDTH,
      height: HEIGHT + 40,
      layer: [
        {
          data: { values: [{ lo: 0.9, hi: 1 }] },
          mark: { type: "rect", color: "#d62728", opacity: 0.1 },
          encoding: { y: { field: "lo", type: "quantitative" }, y2: { field: "hi" } },
        },
        {
          data: { values: [{ y: 0.9, label: `tail: last 10% of ${unit}` }] },
          mark: { type: "text", align: "left", baseline: "bottom", dx: 4, dy: -2, color: "#d62728", fontWeight: "bold" },
          encoding: { y: { field: "y", type: "quantitative" }, x: { value: 0 }, text: { field: "label" } },
        },
        {
          data: { values: p90 },
          mark: { type: "rule", strokeDash: [4, 3], strokeWidth: 1.2 },
          encoding: { x, color, tooltip: { field: "tail" } },
        },
        {
          data: { values: cdf },
          mark: { type: "line", strokeWidth: 1.8 },
          encoding: { x, y: { field: "value", type: "quantitative", scale: { domain: [0, 1] }, axis: { title: `fraction of ${unit} completed`, format: "%" } }, color },
        },
      ],
    } as TopLevelSpec,
  };
}

/**
 * Groups of two or more systems whose series (`pick`) are equal, in the report's order, as "a and b" / "a, b and c":
 * their lines lie on one another.
 */
export function sameLines(report: SimReport, pick: (s: SimReport["systems"][number]) => unknown): string[] {
  const groups = new Map<string, string[]>();
  for (const s of report.systems) {
    const key = JSON.stringify(pick(s));
    groups.set(key, [...(groups.get(key) ?? []), s.system]);
  }
  return [...groups.values()].filter((g) => g.length > 1).map((g) => `${g.slice(0, -1).join(", ")} and ${g[g.length - 1]}`);
}

/** A plot's title with its subtitle lines, and one more naming the systems drawn as one line, when any are. */
function withSameLines(text: string, subtitle: string[], same: string[]): string | { text: string; subtitle: string[] } {
  const lines = same.length === 0 ? subtitle : [...subtitle, `one line for ${same.join("; for ")} (the same figures)`];
  return lines.length === 0 ? text : { text, subtitle: lines };
}

/** Milliseconds as seconds with three significant digits (`12.3 s`, `0.456 s`). */
export function fmtSeconds(ms: number): string {
  return `${Number((ms / 1000).toPrecision(3))} s`;
}
