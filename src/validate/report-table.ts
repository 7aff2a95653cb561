// The table `arbor validate` prints: one row per task with each check's result, then a summary.
import type { CheckOutcome } from "./checks.js";
import type { PanelResult } from "./judge-panel.js";
import type { ValidationReport } from "./validate-tasks.js";

function cell(c: CheckOutcome, good: string, bad: string): string {
  if (c.error) return "error";
  return `${c.ok ? good : bad} (${c.score})`;
}

/** Render the report as a plain-text table. */
export function formatValidationTable(r: ValidationReport): string {
  const header = ["task", "golden", "no-op", ...(r.judges.length > 0 ? ["judges"] : []), "result"];
  const rows = r.tasks.map((t) => [
    t.id,
    cell(t.groundTruth, "pass", "FAIL"),
    cell(t.noOp, "fails", "PASSES"),
    ...(r.judges.length > 0 ? [t.judge ? judgeCell(t.judge) : "-"] : []),
    t.kept ? "kept" : `dropped: ${t.reasons.join(", ")}`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cols: string[]): string => cols.map((c, i) => c.padEnd(widths[i] as number)).join("  ").trimEnd();
  const s = r.summary;
  return [
    line(header),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map(line),
    "",
    `${s.kept}/${s.total} tasks kept; dropped: ${s.byReason["golden-fails"]} golden fails, ${s.byReason["no-op-passes"]} no-op passes, ${s.byReason["judge-rejects"]} judge rejects` +
      (s.byReason["judge-unreachable"] > 0 ? `, ${s.byReason["judge-unreachable"]} undecided (judges unreachable)` : ""),
  ].join("\n");
}

/** `2/3 consistent`, and how many judges could not be reached. */
function judgeCell(j: PanelResult): string {
  const unreachable = j.votes.filter((v) => v.unreachable).length;
  return `${j.approvals}/${j.votes.length} consistent${unreachable > 0 ? `, ${unreachable} unreachable` : ""}`;
}
