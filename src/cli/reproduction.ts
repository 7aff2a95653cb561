// `docs/reproduction.md` (issue 18 item 3): the simulator's figures beside the published ones — Seer's iteration
// time, tail, ablation and share of the oracle on its three Table 3 workloads, ThunderAgent's rollout throughput
// on its two agent workloads — each with its target, whether Arbor meets it, and the attribution of the gap that
// remains. The tables are computed from `arbor sim` reports; the attributions are written by people who measured
// them, in `docs/reproduction-notes.yaml` keyed by row id, and a row that misses its target without one says so.
// The published figures are those of docs/references.md (Seer arXiv 2511.14617 v3; ThunderAgent arXiv 2602.13692).
// Run over several seeds, a row's figure is its mean over the seeds, with their range beside it.
import { arborOverBest } from "../sim/scenario/arbor-over-best.js";
import { checkSameRun, seedSpread } from "../sim/scenario/seed-summary.js";
import type { SimReport, SimSummary, SimSystemResult } from "../sim/scenario/sim-report.js";

/** One published figure and how to compute Arbor's counterpart from the workload's report. */
interface FigureRow {
  /** Stable id, the key of its attribution note: `<workload>/<figure>`. */
  id: string;
  workload: string;
  figure: string;
  paper: string;
  /** The target as text, and whether a measured value meets it. */
  target: string;
  meets: (value: number) => boolean;
  /** Arbor's value, or undefined where a system it needs was not run. */
  value: (report: SimReport) => number | undefined;
  /** The systems the value needs, as a run's options name them (`arbor sim` says so when one is missing). */
  needs: string;
  format: (value: number) => string;
}

const times = (v: number): string => `${v.toFixed(2)}×`;
const percent = (v: number): string => `${(v * 100).toFixed(0)}%`;
/** A tail reduction as the tail's change: −85% (shorter), +5% when the tail grew, 0% when it rounds to none. */
export function tailChange(v: number): string {
  const pct = (Math.abs(v) * 100).toFixed(0);
  return pct === "0" ? "0%" : `${v > 0 ? "−" : "+"}${pct}%`;
}

function system(r: SimReport, name: string): SimSystemResult | undefined {
  return r.systems.find((s) => s.system === name);
}

/** `a` faster than `b`: b's iteration time over a's. */
function speedup(r: SimReport, a: string, b: string): number | undefined {
  const x = system(r, a);
  const y = system(r, b);
  return x && y && x.summary.iterationMs > 0 ? y.summary.iterationMs / x.summary.iterationMs : undefined;
}

/** 1 − a's tail over b's. */
function tailCut(r: SimReport, a: string, b: string): number | undefined {
  const x = system(r, a);
  const y = system(r, b);
  return x && y && y.summary.tailMs > 0 ? 1 - x.summary.tailMs / y.summary.tailMs : undefined;
}

/** a's agent steps per minute over b's (ThunderAgent's throughput figure). */
function stepsRatio(r: SimReport, a: string, b: string): number | undefined {
  const x = system(r, a);
  const y = system(r, b);
  return x && y && y.summary.stepsPerMin > 0 ? x.summary.stepsPerMin / y.summary.stepsPerMin : undefined;
}

const SEER_WORKLOADS = ["seer-moonlight", "seer-qwen2vl", "seer-kimik2"] as const;
/** What "arbor over the best other system" needs. */
const ARBOR_NEEDS = "arbor and a system other than the oracle";
const THUNDER = { "thunder-swe": "mini-SWE-agent 375 → 672 steps/min (1.79×)", "thunder-openhands": "OpenHands 69 → 271 steps/min (3.93×)" } as const;

function seerRows(w: string): FigureRow[] {
  const moonlight = w === "seer-moonlight";
  const rows: FigureRow[] = [
    { id: `${w}/speedup`, workload: w, figure: "seer over verl-like, iteration time", paper: moonlight ? "1.79× (3,910 → 2,181 s); 1.44–2.04× over all" : "1.44–2.04× (throughput +44–104%)", target: "≥ 1.44×", meets: (v) => v >= 1.44, value: (r) => speedup(r, "seer", "verl-like"), needs: "seer and verl-like", format: times },
    { id: `${w}/tail`, workload: w, figure: "seer over verl-like, tail (last 10% of requests)", paper: moonlight ? "−85% (1,817 → 278 s); −72…−94% over all" : "−72…−94%", target: "−72% or better", meets: (v) => v >= 0.72, value: (r) => tailCut(r, "seer", "verl-like"), needs: "seer and verl-like", format: tailChange },
    { id: `${w}/oracle`, workload: w, figure: "seer's share of the oracle (oracle time / seer time)", paper: "96%", target: "≥ 96%", meets: (v) => v >= 0.96, value: (r) => speedup(r, "seer", "oracle"), needs: "seer and oracle", format: percent },
    { id: `${w}/arbor`, workload: w, figure: "arbor over the best other system", paper: "—", target: "≥ 1.00×", meets: (v) => v >= 0.995, value: (r) => arborOverBest(r, false), needs: ARBOR_NEEDS, format: times },
  ];
  if (moonlight) {
    const ablation: [string, string, number][] = [
      ["seer-divided", "divided rollout only", 1.41],
      ["seer", "+ context-aware scheduling", 1.47],
      ["seer-specdec", "+ grouped speculative decoding", 1.9],
    ];
    for (const [name, what, paper] of ablation) {
      rows.push({ id: `${w}/ablation-${name}`, workload: w, figure: `ablation: ${what} (${name}) over verl-like`, paper: times(paper), target: `≥ ${times(paper)}`, meets: (v) => v >= paper, value: (r) => speedup(r, name, "verl-like"), needs: `${name} and verl-like`, format: times });
    }
  }
  return rows;
}

/** "arbor at least the best of them" on a workload of agent programs (judged by steps per minute). */
function agentArborRow(w: string, paper = "—"): FigureRow {
  return { id: `${w}/arbor`, workload: w, figure: "arbor over the best other system, agent steps/min", paper, target: "≥ 1.00×", meets: (v) => v >= 0.995, value: (r) => arborOverBest(r, true), needs: ARBOR_NEEDS, format: times };
}

function thunderRows(w: keyof typeof THUNDER): FigureRow[] {
  return [
    { id: `${w}/thunderagent`, workload: w, figure: "thunderagent over sglang-router, agent steps/min", paper: `${THUNDER[w]}; 1.8–3.9× over all`, target: "≥ 1.8×", meets: (v) => v >= 1.8, value: (r) => stepsRatio(r, "thunderagent", "sglang-router"), needs: "thunderagent and sglang-router", format: times },
    agentArborRow(w),
  ];
}

/** Every row of the reproduction table, in order. */
export const REPRODUCTION_ROWS: readonly FigureRow[] = [
  ...SEER_WORKLOADS.flatMap(seerRows),
  ...(Object.keys(THUNDER) as (keyof typeof THUNDER)[]).flatMap(thunderRows),
  agentArborRow("search-agent", "— (no published figure)"),
];

/**
 * The targets that apply to one run of a workload (what `arbor sim` prints under its table): the workload's own rows
 * of the reproduction table, or for a workload outside it (a workload file, a replay) those of its kind: Seer's on a
 * rollout workload, "arbor at least the best of them" on agent programs (ThunderAgent's figures are its two
 * workloads', not every agent workload's).
 */
export function targetRows(workload: SimReport["workload"]): readonly FigureRow[] {
  const own = REPRODUCTION_ROWS.filter((row) => row.workload === workload.name);
  if (own.length > 0) return own;
  if (workload.kind === "rollout") return seerRows(workload.name);
  return [agentArborRow(workload.name)];
}

/**
 * One target on a run's reports (one per seed), as a line: the figure (over several seeds, their mean and range, as
 * the reproduction table gives it), the target and whether the mean meets it (and how many seeds do), or what to run.
 */
export function targetLine(row: FigureRow, reports: readonly SimReport[]): string {
  const v = rowValue(row, reports);
  const paper = row.paper.startsWith("—") ? "" : `; paper ${row.paper}`;
  if (v === undefined) return `${row.figure}: not measured (run ${row.needs}); target ${row.target}${paper}`;
  const seeds = v.seeds > 1 ? ` (${v.met} of ${v.seeds} seeds meet it)` : "";
  return `${row.figure}: ${formatValue(row, v)}, target ${row.target}: ${row.meets(v.mean) ? "met" : "missed"}${seeds}${paper}`;
}

/** The workloads the table needs, and the systems each must run. */
export const REPRODUCTION_PLAN: Readonly<Record<string, readonly string[]>> = {
  "seer-moonlight": ["verl-like", "seer-divided", "seer", "seer-specdec", "oracle", "arbor"],
  "seer-qwen2vl": ["verl-like", "seer", "oracle", "arbor"],
  "seer-kimik2": ["verl-like", "seer", "oracle", "arbor"],
  "thunder-swe": ["verl-like", "sglang-router", "thunderagent", "arbor"],
  "thunder-openhands": ["verl-like", "sglang-router", "thunderagent", "arbor"],
  "search-agent": ["verl-like", "sglang-router", "thunderagent", "arbor"],
};

const escape = (s: string): string => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

function systemsTable(r: SimReport): string[] {
  const agent = r.workload.kind !== "rollout";
  const head = agent
    ? "| system | steps/min | makespan (s) | program p99 (s) | tail (s) | preemptions | recomputed tokens | speedup vs baseline |"
    : "| system | iteration (s) | throughput (tok/s) | tail (s) | p99 (s) | preemptions | recomputed tokens | speedup vs baseline |";
  const lines = [head, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"];
  for (const s of r.systems) {
    const m = s.summary;
    const ratio = r.ratios.find((x) => x.system === s.system);
    const sec = (ms: number): string => (ms / 1000).toFixed(0);
    const cells = agent ? [m.stepsPerMin.toFixed(0), sec(m.makespanMs), sec(m.p99Ms), sec(m.tailMs)] : [sec(m.iterationMs), m.throughputTokensPerS.toFixed(0), sec(m.tailMs), sec(m.p99Ms)];
    lines.push(`| ${s.system} | ${cells.join(" | ")} | ${m.preemptions} | ${m.recomputedTokens} | ${ratio ? times(ratio.speedup) : "—"} |`);
  }
  return lines;
}

/** How the tables were made: printed in the document so anyone can make them again. */
export interface ReproductionMeta {
  command: string;
  /** The seeds every workload ran under (one report per seed), in order. */
  seeds: readonly number[];
  scale: number;
}

/** A row's figure over a workload's reports (one per seed): the mean, and the range when there are several. */
interface RowValue {
  mean: number;
  min: number;
  max: number;
  /** Seeds whose own figure meets the target. */
  met: number;
  seeds: number;
}

/** The row's figure over `reports`, or undefined when none was run or a system it needs is missing from one. */
function rowValue(row: FigureRow, reports: readonly SimReport[] | undefined): RowValue | undefined {
  if (reports === undefined || reports.length === 0) return undefined;
  const values = reports.map((r) => row.value(r));
  if (values.some((v) => v === undefined)) return undefined;
  const s = seedSpread(values as number[]);
  return { mean: s.mean, min: s.min, max: s.max, met: s.values.filter((v) => row.meets(v)).length, seeds: s.values.length };
}

/** The figure as the table prints it: the mean, then (several seeds) the range. */
function formatValue(row: FigureRow, v: RowValue): string {
  return v.seeds === 1 ? row.format(v.mean) : `${row.format(v.mean)} (${row.format(v.min)} … ${row.format(v.max)})`;
}

/**
 * One report whose summaries and ratios are the means of `reports`' (same workload and systems, one per seed):
 * the per-workload table of a run over several seeds. Counts (preemptions, recomputed tokens) are rounded; the
 * series and completion percentiles stay the first seed's (the document draws none).
 */
export function meanReport(reports: readonly SimReport[]): SimReport {
  const first = checkSameRun(reports, "reproduction");
  if (reports.length === 1) return first;
  const avg = (f: (r: SimReport) => number): number => reports.reduce((a, r) => a + f(r), 0) / reports.length;
  const systems = first.systems.map((s, i) => {
    const summary = { ...s.summary };
    for (const key of Object.keys(summary) as (keyof SimSummary)[]) {
      const m = avg((r) => (r.systems[i] as SimSystemResult).summary[key] as number);
      (summary as Record<string, number>)[key] = key === "preemptions" || key === "recomputedTokens" ? Math.round(m) : m;
    }
    return { ...s, summary };
  });
  const ratios = first.ratios.map((x, i) => ({ ...x, speedup: avg((r) => r.ratios[i]?.speedup ?? 0), throughput: avg((r) => r.ratios[i]?.throughput ?? 0), tailReduction: avg((r) => r.ratios[i]?.tailReduction ?? 0) }));
  return { ...first, systems, ratios };
}

/**
 * The reproduction document from the workloads' reports (by workload name, one per seed, in the seeds' order) and
 * the attribution notes (by row id). Deterministic: the same reports and notes give the same text.
 */
export function reproductionMarkdown(reports: ReadonlyMap<string, readonly SimReport[]>, notes: Readonly<Record<string, string>>, meta: ReproductionMeta): string {
  const several = meta.seeds.length > 1;
  const seedText = several ? `seeds ${meta.seeds.join(", ")}` : `seed ${meta.seeds[0]}`;
  const out: string[] = [
    "# Reproducing the papers' numbers",
    "",
    `Generated by \`${meta.command}\` (${seedText}, scale ${meta.scale}); do not edit by hand — the attributions come from`,
    "`docs/reproduction-notes.yaml`. Every figure is simulated: the production engine scheduler and KV manager on the",
    "cost model, the rollout orchestrator and scheduling policies, the gateway's call path (routing, pausing), on the",
    "virtual clock (`arbor sim`). Published figures: Seer arXiv 2511.14617 v3 (Table 3, §7), ThunderAgent arXiv 2602.13692.",
    ...(several
      ? ["", `Each figure is the mean over the ${meta.seeds.length} seeds, with the lowest and highest seed's in brackets; "met" judges the mean and counts the seeds whose own figure meets the target. The tables per workload are the means over the seeds.`]
      : []),
    "",
    "## The table",
    "",
    "| row | workload | figure | paper | Arbor | target | met | gap attribution |",
    "| --- | --- | --- | --- | ---: | --- | --- | --- |",
  ];
  for (const row of REPRODUCTION_ROWS) {
    const v = rowValue(row, reports.get(row.workload));
    const met = v === undefined ? "not run" : `${row.meets(v.mean) ? "yes" : "no"}${v.seeds > 1 ? ` (${v.met} of ${v.seeds} seeds meet it)` : ""}`;
    const note = notes[row.id] ?? (v !== undefined && !row.meets(v.mean) ? "**unattributed**" : "");
    out.push(`| ${row.id} | ${row.workload} | ${escape(row.figure)} | ${escape(row.paper)} | ${v === undefined ? "—" : formatValue(row, v)} | ${escape(row.target)} | ${met} | ${escape(note)} |`);
  }
  for (const [name, rs] of [...reports.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const r = meanReport(rs);
    out.push("", `## ${name}`, "", escape(r.workload.description), "");
    // Sorted: a report read back (--reuse) has its keys in another order than a fresh run's.
    const scale = Object.entries(r.workload.scale).sort(([a], [b]) => a.localeCompare(b));
    out.push(`Scale: ${scale.map(([k, v]) => `${k} ${v}`).join(", ")}.`, "");
    if (rs.length > 1) out.push(`Means over seeds ${rs.map((x) => x.seed).join(", ")}:`, "");
    out.push(...systemsTable(r), "", "Sources:", ...r.workload.sources.map((s) => `- ${s}`));
    const general = notes[`${name}/*`];
    if (general) out.push("", general);
  }
  // A workload not run keeps its note: why it is missing is part of the record.
  for (const name of Object.keys(REPRODUCTION_PLAN).filter((w) => !reports.has(w) && notes[`${w}/*`] !== undefined)) {
    out.push("", `## ${name} (not run)`, "", notes[`${name}/*`] as string);
  }
  return `${out.join("\n")}\n`;
}

/** The rows whose target is missed (by the mean over the seeds) and that have no attribution note (the command warns about each). */
export function unattributedRows(reports: ReadonlyMap<string, readonly SimReport[]>, notes: Readonly<Record<string, string>>): string[] {
  return REPRODUCTION_ROWS.filter((row) => {
    const v = rowValue(row, reports.get(row.workload));
    return v !== undefined && !row.meets(v.mean) && notes[row.id] === undefined;
  }).map((row) => row.id);
}
