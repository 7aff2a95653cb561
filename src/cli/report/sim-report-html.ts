// The report as one self-contained HTML page: the workload (what it models, the scale run, the sources of its
// figures), a summary table with one column per system and the ratios against the baseline, notes on what was not
// recorded, and the plots as inline SVG. Styles are inline and there is no script and no URL to fetch, so the file
// opens from disk, offline, and is the same bytes for the same report (no timestamp in it).
import type { SimReport, SimSummary } from "../../sim/scenario/sim-report.js";
import { completionUnit, fmtSeconds } from "./report-charts.js";

/** A rendered plot: its id, title and SVG. */
export interface RenderedChart {
  id: string;
  title: string;
  svg: string;
}

const CSS = `
body { font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
.sub { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f4f4f4; } tr.ratio td { background: #f7fbff; font-weight: 600; }
td.better { color: #1a7f37; } td.worse { color: #b42318; }
figure { margin: 1.5rem 0; }
figure svg { max-width: 100%; height: auto; }
.notes li, .sources li { margin: 0.2rem 0; } code { background: #f4f4f4; padding: 0 0.2rem; }
`;

/** HTML-escape text for element content and attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

const nf = (digits: number) => new Intl.NumberFormat("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
const int = nf(0);
const two = nf(2);
const s = (ms: number): string => two.format(ms / 1000);

type System = SimReport["systems"][number];
/** A figure whose series is empty and whose value is 0 was not recorded (a real run's KV usage), not measured 0. */
const NOT_RECORDED = "not recorded";
const recorded = (series: readonly unknown[], value: number): boolean => series.length > 0 || value !== 0;

/** The summary rows: label (with its unit) and how a system's value reads. */
const ROWS: readonly [string, (x: SimSummary, sys: System) => string][] = [
  ["requests (issued)", (x) => int.format(x.requests)],
  ["completed", (x) => int.format(x.completed)],
  ["aborted", (x) => int.format(x.aborted)],
  ["programs / groups", (x) => int.format(x.programs)],
  ["makespan (s)", (x) => s(x.makespanMs)],
  ["iteration time (s)", (x) => s(x.iterationMs)],
  ["output tokens", (x) => int.format(x.outputTokens)],
  ["throughput (output tokens/s)", (x) => two.format(x.throughputTokensPerS)],
  ["steps per minute", (x) => two.format(x.stepsPerMin)],
  ["p50 completion (s)", (x) => s(x.p50Ms)],
  ["p90 completion (s)", (x) => s(x.p90Ms)],
  ["p99 completion (s)", (x) => s(x.p99Ms)],
  ["tail: p90 → last (s)", (x) => s(x.tailMs)],
  ["preemptions", (x, sys) => (recorded(sys.series.preemptions, x.preemptions) ? int.format(x.preemptions) : NOT_RECORDED)],
  ["recomputed tokens", (x, sys) => (recorded(sys.series.recomputedTokens, x.recomputedTokens) ? int.format(x.recomputedTokens) : NOT_RECORDED)],
  ["peak KV usage (% of capacity)", (x, sys) => (recorded(Object.values(sys.series.kvUsage).flat(), x.peakKvUsage) ? nf(1).format(x.peakKvUsage * 100) : NOT_RECORDED)],
  ["mean staleness (policy versions)", (x) => two.format(x.meanStaleness)],
];

function cls(v: number, neutral: number): string {
  if (Math.abs(v - neutral) < 1e-9) return "";
  return v > neutral ? ' class="better"' : ' class="worse"';
}

function summaryTable(report: SimReport): string {
  const head = report.systems.map((x) => `<th>${escapeHtml(x.system)}${x.system === report.baseline ? "<br><small>(baseline)</small>" : ""}</th>`).join("");
  const ratio = new Map(report.ratios.map((r) => [r.system, r]));
  const ratioRow = (label: string, f: (r: SimReport["ratios"][number]) => string, v: (r: SimReport["ratios"][number]) => number, neutral: number): string =>
    `<tr class="ratio"><td>${label}</td>${report.systems
      .map((x) => {
        const r = ratio.get(x.system);
        return r ? `<td${cls(v(r), neutral)}>${f(r)}</td>` : "<td>–</td>";
      })
      .join("")}</tr>`;
  const b = escapeHtml(report.baseline);
  const rows = [
    ratioRow(`speedup vs ${b} (iteration time, ×)`, (r) => `${two.format(r.speedup)}×`, (r) => r.speedup, 1),
    ratioRow(`throughput vs ${b} (×)`, (r) => `${two.format(r.throughput)}×`, (r) => r.throughput, 1),
    ratioRow(`tail reduction vs ${b} (%)`, (r) => `${nf(1).format(r.tailReduction * 100)}%`, (r) => r.tailReduction, 0),
    ...ROWS.map(([label, f]) => `<tr><td>${label}</td>${report.systems.map((x) => `<td>${f(x.summary, x)}</td>`).join("")}</tr>`),
  ];
  return `<table class="summary"><thead><tr><th>figure</th>${head}</tr></thead><tbody>\n${rows.join("\n")}\n</tbody></table>`;
}

function workloadSection(report: SimReport): string {
  const w = report.workload;
  const scale = Object.keys(w.scale)
    .sort()
    .map((k) => {
      const v = w.scale[k];
      return `<tr><td>${escapeHtml(k)}</td><td>${escapeHtml(typeof v === "number" ? nf(4).format(v) : String(v))}</td></tr>`;
    })
    .join("\n");
  const sources = w.sources.length > 0 ? `<ul class="sources">${w.sources.map((x) => `<li>${escapeHtml(x)}</li>`).join("")}</ul>` : "<p>No sources given.</p>";
  return `<h2 id="workload">Workload</h2>
<p><b>${escapeHtml(w.name)}</b> (${escapeHtml(w.kind)}, seed ${report.seed}): ${escapeHtml(w.description)}</p>
<table class="scale"><thead><tr><th>scale</th><th>value</th></tr></thead><tbody>
${scale}
</tbody></table>
<h3>Sources</h3>
${sources}`;
}

/** The report page: `charts` are the plots already rendered to SVG, `notes` what was left out and why. */
export function simReportHtml(report: SimReport, charts: readonly RenderedChart[], notes: readonly string[]): string {
  const systems = report.systems.map((x) => `<li><b>${escapeHtml(x.system)}</b>: ${escapeHtml(x.description)}</li>`).join("\n");
  const unit = completionUnit(report);
  const tails = report.systems.map((x) => `${escapeHtml(x.system)} ${fmtSeconds(x.summary.tailMs)}`).join(", ");
  const figures = charts.map((c) => `<figure id="${escapeHtml(c.id)}" aria-label="${escapeHtml(c.title)}">\n${c.svg}\n</figure>`).join("\n");
  const noteList = notes.length > 0 ? `<h2 id="notes">Not recorded</h2>\n<ul class="notes">${notes.map((n) => `<li>${escapeHtml(n)}</li>`).join("\n")}</ul>` : "";
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Arbor report: ${escapeHtml(report.workload.name)}</title>
<style>${CSS}</style>
</head>
<body>
<h1>Arbor report: ${escapeHtml(report.workload.name)}</h1>
<p class="sub">${report.systems.length} system${report.systems.length === 1 ? "" : "s"}, baseline <b>${escapeHtml(report.baseline)}</b>; tail (the last 10% of ${unit}): ${tails}.</p>
<h2 id="summary">Summary</h2>
${summaryTable(report)}
<h3>Systems</h3>
<ul>
${systems}
</ul>
${workloadSection(report)}
<h2 id="plots">Plots</h2>
${figures}
${noteList}
</body>
</html>
`;
}
