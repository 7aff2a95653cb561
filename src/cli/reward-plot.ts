// The learning curve of a training run: mean reward per iteration (and each reward component's mean, dashed)
// as a small standalone SVG written to the run's output directory, and as a one-line terminal sparkline.

/** One point of the curve. */
export interface RewardPoint {
  iteration: number;
  meanReward: number;
  /** Mean of each reward component at this iteration (drawn as dashed lines when there are two or more). */
  components?: Record<string, number>;
}

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

/**
 * SVG line chart of mean reward per iteration: y from min(0, lowest) to max(1, highest), a point and its
 * value at every iteration, gridlines at quarter steps, each reward component as a dashed line with a
 * legend. Self-contained (no fonts or scripts to fetch).
 */
export function rewardPlotSvg(points: readonly RewardPoint[], title = "mean reward per iteration"): string {
  const W = 640;
  const H = 360;
  const m = { left: 56, right: 24, top: 40, bottom: 48 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const names = [...new Set(points.flatMap((p) => Object.keys(p.components ?? {})))].sort();
  // A single component is the total itself.
  const series = names.length > 1 ? names : [];
  const ys = [...points.map((p) => p.meanReward), ...points.flatMap((p) => series.map((n) => p.components?.[n] ?? 0))];
  const yMin = Math.min(0, ...ys);
  const yMax = Math.max(1, ...ys);
  const xs = points.map((p) => p.iteration);
  const xMin = Math.min(...xs, 1);
  const xMax = Math.max(...xs, xMin + 1);
  const x = (v: number): number => m.left + ((v - xMin) / (xMax - xMin)) * pw;
  const y = (v: number): number => m.top + (1 - (v - yMin) / (yMax - yMin)) * ph;
  const f = (v: number): string => v.toFixed(1);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  ];
  for (let k = 0; k <= 4; k++) {
    const v = yMin + ((yMax - yMin) * k) / 4;
    out.push(`<line x1="${m.left}" y1="${f(y(v))}" x2="${W - m.right}" y2="${f(y(v))}" stroke="#ddd"/>`);
    out.push(`<text x="${m.left - 8}" y="${f(y(v) + 4)}" text-anchor="end">${v.toFixed(2)}</text>`);
  }
  for (const p of points) out.push(`<text x="${f(x(p.iteration))}" y="${H - m.bottom + 18}" text-anchor="middle">${p.iteration}</text>`);
  out.push(`<text x="${m.left + pw / 2}" y="${H - 10}" text-anchor="middle">iteration</text>`);
  out.push(`<text x="16" y="${m.top + ph / 2}" text-anchor="middle" transform="rotate(-90 16 ${m.top + ph / 2})">mean reward</text>`);
  out.push(`<rect x="${m.left}" y="${m.top}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  if (points.length > 0) {
    // The total first: it is the chart's subject, drawn and labelled in full.
    const path = points.map((p, i) => `${i === 0 ? "M" : "L"}${f(x(p.iteration))},${f(y(p.meanReward))}`).join(" ");
    out.push(`<path d="${path}" fill="none" stroke="#1f77b4" stroke-width="2"/>`);
    for (const p of points) {
      out.push(`<circle cx="${f(x(p.iteration))}" cy="${f(y(p.meanReward))}" r="3.5" fill="#1f77b4"><title>iteration ${p.iteration}: ${p.meanReward.toFixed(3)}</title></circle>`);
      out.push(`<text x="${f(x(p.iteration))}" y="${f(y(p.meanReward) - 8)}" text-anchor="middle" fill="#1f77b4">${p.meanReward.toFixed(2)}</text>`);
    }
    series.forEach((name, k) => {
      const colour = COMPONENT_COLOURS[k % COMPONENT_COLOURS.length] as string;
      const d = points.map((p, i) => `${i === 0 ? "M" : "L"}${f(x(p.iteration))},${f(y(p.components?.[name] ?? 0))}`).join(" ");
      out.push(`<path d="${d}" fill="none" stroke="${colour}" stroke-width="1.5" stroke-dasharray="5 3"><title>${esc(name)}</title></path>`);
    });
    const legend: [string, string, string][] = [["total", "#1f77b4", ""], ...series.map((n, k): [string, string, string] => [n, COMPONENT_COLOURS[k % COMPONENT_COLOURS.length] as string, ' stroke-dasharray="5 3"'])];
    if (series.length > 0) {
      legend.forEach(([name, colour, dash], k) => {
        const ly = m.top + 14 + k * 16;
        out.push(`<line x1="${m.left + 10}" y1="${ly - 4}" x2="${m.left + 34}" y2="${ly - 4}" stroke="${colour}" stroke-width="2"${dash}/>`);
        out.push(`<text x="${m.left + 40}" y="${ly}">${esc(name)}</text>`);
      });
    }
  }
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
