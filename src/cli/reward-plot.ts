// The learning curve of a training run: mean reward per iteration (and each reward component's mean, dashed),
// and the held-out solved rate of each evaluated policy version with ±1 standard-error bars (version 0 at
// iteration 0), as a small standalone SVG written to the run's output directory, and a terminal sparkline.

/** One point of the curve. */
export interface RewardPoint {
  iteration: number;
  meanReward: number;
  /** Mean of each reward component at this iteration (drawn as dashed lines when there are two or more). */
  components?: Record<string, number>;
}

/** A held-out score on the plot: the version evaluated after `iteration` (0: before training). */
export interface HeldOutPoint {
  iteration: number;
  version: number;
  /** Solved rate (0..1) and its standard error. */
  solved: number;
  se: number;
}

const HELD_OUT_COLOUR = "#17becf";

const COMPONENT_COLOURS = ["#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"];

const BARS = "▁▂▃▄▅▆▇█";

/** A sparkline scaled to the values' own range (a flat line when they are all equal). */
export function sparkline(values: readonly number[]): string {
  const min = Math.min(...values);
  const span = Math.max(...values) - min || 1;
  return values.map((v) => BARS[Math.min(BARS.length - 1, Math.floor(((v - min) / span) * BARS.length))] as string).join("");
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** A y-axis: gridline values `lo, lo + step, …, hi` and the decimals their labels need. */
export interface YAxis {
  lo: number;
  hi: number;
  step: number;
  ticks: number[];
  decimals: number;
}

/** The smallest of 1, 2, 5 × 10^k that is ≥ `raw` (> 0). */
function niceStep(raw: number): number {
  const p = 10 ** Math.floor(Math.log10(raw));
  const f = raw / p;
  // The tolerance keeps 0.2/0.1 (= 2.0000000000000004) from rounding up to 5.
  return (f <= 1 + 1e-9 ? 1 : f <= 2 + 1e-9 ? 2 : f <= 5 + 1e-9 ? 5 : 10) * p;
}

/**
 * A y-axis fitted to `values`: about five intervals of a round step (1, 2 or 5 × 10^k), ending on multiples
 * of the step just around the data — so a curve between −0.2 and 0 fills the frame instead of its bottom fifth.
 * Equal values get a small band around them.
 */
export function niceAxis(values: readonly number[]): YAxis {
  const finite = values.filter(Number.isFinite);
  let min = finite.length > 0 ? Math.min(...finite) : 0;
  let max = finite.length > 0 ? Math.max(...finite) : 1;
  // A spread at the limit of the values' float precision (1e4 + 1e-12) has no round ticks between its ends.
  if (max - min < 1e-9 * Math.max(1, Math.abs(min), Math.abs(max))) {
    const pad = Math.max(Math.abs(min) * 0.1, 0.05);
    min -= pad;
    max += pad;
  }
  const step = niceStep((max - min) / 5);
  // Integer tick indices: the values are i·step.
  const iLo = Math.floor(min / step + 1e-9);
  const iHi = Math.ceil(max / step - 1e-9);
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  // A multiple of a 1/2/5 × 10^k step has at most `decimals` digits: rounding there removes the float noise.
  const ticks = Array.from({ length: iHi - iLo + 1 }, (_, k) => Number(((iLo + k) * step).toFixed(decimals)) + 0);
  return { lo: ticks[0] as number, hi: ticks[ticks.length - 1] as number, step, ticks, decimals };
}

const LEGEND_ROW_PX = 18;

/** One legend entry: its swatch's left edge and row. */
interface LegendEntry {
  name: string;
  colour: string;
  dash: string;
  x: number;
  row: number;
}

/**
 * The legend's entries laid out left to right from `left`, wrapping before `right` (about 7 px per
 * character): none when there is nothing but the total to tell apart (`series` null: no reward points).
 */
function legendRows(series: readonly string[] | null, heldOut: boolean, left: number, right: number): { entries: LegendEntry[]; height: number } {
  if (series === null) return { entries: [], height: 0 };
  const items: [string, string, string][] = [
    ["total", "#1f77b4", ""],
    ...series.map((n, k): [string, string, string] => [n, COMPONENT_COLOURS[k % COMPONENT_COLOURS.length] as string, ' stroke-dasharray="5 3"']),
    ...(heldOut ? ([["held-out solved (±1 SE)", HELD_OUT_COLOUR, ""]] as [string, string, string][]) : []),
  ];
  if (items.length < 2) return { entries: [], height: 0 };
  const entries: LegendEntry[] = [];
  let x = left;
  let row = 0;
  for (const [name, colour, dash] of items) {
    const width = 30 + 7 * name.length + 16;
    if (x > left && x + width > right) {
      row++;
      x = left;
    }
    entries.push({ name, colour, dash, x, row });
    x += width;
  }
  return { entries, height: (row + 1) * LEGEND_ROW_PX + 10 };
}

/**
 * SVG line chart of mean reward per iteration: the y-axis fitted to the data with round ticks
 * ({@link niceAxis}), a point and its value at every iteration (labels kept inside the frame), each reward
 * component as a dashed line, with a legend under the chart (never over the data). Self-contained (no
 * fonts or scripts to fetch).
 */
export function rewardPlotSvg(points: readonly RewardPoint[], title?: string, heldOut: readonly HeldOutPoint[] = []): string {
  const heading = title ?? (heldOut.length > 0 ? "mean reward and held-out solved rate per iteration" : "mean reward per iteration");
  const W = 640;
  const m = { left: 56, right: 24, top: 40, bottom: 48 };
  const pw = W - m.left - m.right;
  const ph = 360 - m.top - m.bottom;
  const names = [...new Set(points.flatMap((p) => Object.keys(p.components ?? {})))].sort();
  // A single component is the total itself.
  const series = names.length > 1 ? names : [];
  // The legend goes under the chart, never over the lines and labels it names.
  const legend = legendRows(points.length > 0 ? series : null, heldOut.length > 0, m.left, W - m.right);
  const H = 360 + legend.height;
  const ys = [...points.map((p) => p.meanReward), ...points.flatMap((p) => series.map((n) => p.components?.[n] ?? 0)), ...heldOut.flatMap((h) => [h.solved - h.se, h.solved + h.se])];
  const axis = niceAxis(ys);
  const yMin = axis.lo;
  const yMax = axis.hi;
  const xs = [...points.map((p) => p.iteration), ...heldOut.map((h) => h.iteration)];
  const xMin = Math.min(...xs, 1);
  const xMax = Math.max(...xs, xMin + 1);
  const x = (v: number): number => m.left + ((v - xMin) / (xMax - xMin)) * pw;
  const y = (v: number): number => m.top + (1 - (v - yMin) / (yMax - yMin)) * ph;
  const f = (v: number): string => v.toFixed(1);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(heading)}</text>`,
  ];
  for (const v of axis.ticks) {
    out.push(`<line x1="${m.left}" y1="${f(y(v))}" x2="${W - m.right}" y2="${f(y(v))}" stroke="#ddd"/>`);
    out.push(`<text x="${m.left - 8}" y="${f(y(v) + 4)}" text-anchor="end">${v.toFixed(axis.decimals)}</text>`);
  }
  for (const it of [...new Set(xs)].sort((a, b) => a - b)) out.push(`<text x="${f(x(it))}" y="${m.top + ph + 18}" text-anchor="middle">${it}</text>`);
  out.push(`<text x="${m.left + pw / 2}" y="${m.top + ph + 38}" text-anchor="middle">iteration</text>`);
  const yLabel = heldOut.length > 0 ? "mean reward / solved rate" : "mean reward";
  out.push(`<text x="16" y="${m.top + ph / 2}" text-anchor="middle" transform="rotate(-90 16 ${m.top + ph / 2})">${yLabel}</text>`);
  out.push(`<rect x="${m.left}" y="${m.top}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  if (points.length > 0) {
    // The total first: it is the chart's subject, drawn and labelled in full.
    const path = points.map((p, i) => `${i === 0 ? "M" : "L"}${f(x(p.iteration))},${f(y(p.meanReward))}`).join(" ");
    out.push(`<path d="${path}" fill="none" stroke="#1f77b4" stroke-width="2"/>`);
    for (const p of points) {
      const px = x(p.iteration);
      const py = y(p.meanReward);
      out.push(`<circle cx="${f(px)}" cy="${f(py)}" r="3.5" fill="#1f77b4"><title>iteration ${p.iteration}: ${p.meanReward.toFixed(3)}</title></circle>`);
      // Points on the frame's left/right edge get labels that extend inwards; points near its top edge get
      // them below, so no label crosses the frame.
      const anchor = px >= W - m.right - 20 ? "end" : px <= m.left + 20 ? "start" : "middle";
      const lx = anchor === "end" ? px - 6 : anchor === "start" ? px + 6 : px;
      const ly = py - 8 - 12 < m.top ? py + 16 : py - 8;
      out.push(`<text x="${f(lx)}" y="${f(ly)}" text-anchor="${anchor}" fill="#1f77b4">${p.meanReward.toFixed(2)}</text>`);
    }
    series.forEach((name, k) => {
      const colour = COMPONENT_COLOURS[k % COMPONENT_COLOURS.length] as string;
      const d = points.map((p, i) => `${i === 0 ? "M" : "L"}${f(x(p.iteration))},${f(y(p.components?.[name] ?? 0))}`).join(" ");
      out.push(`<path d="${d}" fill="none" stroke="${colour}" stroke-width="1.5" stroke-dasharray="5 3"><title>${esc(name)}</title></path>`);
    });
  }
  if (heldOut.length > 0) {
    // Held-out solved rate: a line through the versions, each with a ±1 SE bar and its value in percent.
    const d = heldOut.map((h, i) => `${i === 0 ? "M" : "L"}${f(x(h.iteration))},${f(y(h.solved))}`).join(" ");
    out.push(`<path d="${d}" fill="none" stroke="${HELD_OUT_COLOUR}" stroke-width="2"/>`);
    for (const h of heldOut) {
      const px = x(h.iteration);
      const [top, bottom] = [y(h.solved + h.se), y(h.solved - h.se)];
      out.push(`<line x1="${f(px)}" y1="${f(top)}" x2="${f(px)}" y2="${f(bottom)}" stroke="${HELD_OUT_COLOUR}" stroke-width="1.5"/>`);
      out.push(`<line x1="${f(px - 4)}" y1="${f(top)}" x2="${f(px + 4)}" y2="${f(top)}" stroke="${HELD_OUT_COLOUR}" stroke-width="1.5"/>`);
      out.push(`<line x1="${f(px - 4)}" y1="${f(bottom)}" x2="${f(px + 4)}" y2="${f(bottom)}" stroke="${HELD_OUT_COLOUR}" stroke-width="1.5"/>`);
      out.push(
        `<rect x="${f(px - 3.5)}" y="${f(y(h.solved) - 3.5)}" width="7" height="7" fill="${HELD_OUT_COLOUR}"><title>held-out v${h.version}: ${(100 * h.solved).toFixed(1)}% ± ${(100 * h.se).toFixed(1)}</title></rect>`,
      );
      const anchor = px >= W - m.right - 20 ? "end" : px <= m.left + 20 ? "start" : "middle";
      const lx = anchor === "end" ? px - 6 : anchor === "start" ? px + 6 : px;
      const ly = bottom + 14 > m.top + ph ? top - 6 : bottom + 14;
      out.push(`<text x="${f(lx)}" y="${f(ly)}" text-anchor="${anchor}" fill="${HELD_OUT_COLOUR}">${(100 * h.solved).toFixed(0)}%</text>`);
    }
  }
  for (const e of legend.entries) {
    const ly = m.top + ph + 38 + 24 + e.row * LEGEND_ROW_PX;
    out.push(`<line x1="${e.x}" y1="${ly - 4}" x2="${e.x + 24}" y2="${ly - 4}" stroke="${e.colour}" stroke-width="2"${e.dash}/>`);
    out.push(`<text x="${e.x + 30}" y="${ly}">${esc(e.name)}</text>`);
  }
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
