// Plain-text tables for benchmark reports: numbers right-aligned, text left-aligned.
import type { BenchTable } from "./bench.js";

function cell(v: string | number): string {
  if (typeof v === "string") return v;
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toPrecision(3);
}

/** Render a table as lines of text. */
export function formatTable(t: BenchTable): string {
  const rows = t.rows.map((r) => r.map(cell));
  const widths = t.columns.map((c, i) => Math.max(c.length, ...rows.map((r) => (r[i] ?? "").length)));
  const numeric = t.columns.map((_, i) => t.rows.length > 0 && t.rows.every((r) => typeof r[i] === "number"));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (numeric[i] ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join("  ").trimEnd();
  const out = [t.title, line(t.columns), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)];
  for (const n of t.notes ?? []) out.push(`  ${n}`);
  return out.join("\n");
}
