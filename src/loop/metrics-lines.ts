// Reading metrics.jsonl back (metrics-log.ts writes it): a resumed run keeping its earlier lines and drawing its
// whole curve, the dashboard's curves, `arbor report`'s staleness series. One reader so that all of them skip the
// same lines (a line cut by a kill, one that is not a JSON object) and read a held-out score the same way. Lines
// are loosely typed on purpose: an older run's lines lack fields added since, and each caller checks the fields it
// uses.

/** One line of metrics.jsonl as read back: its text (kept byte for byte when rewritten) and its fields. */
export interface MetricsLine {
  text: string;
  fields: Readonly<Record<string, unknown>>;
}

/** A held-out score as a line carries it (the starting `held-out` line, or an iteration's `heldOut` field). */
export interface HeldOutOfLine {
  version: number;
  solved: number;
  /** Standard error of `solved` (null when the line has none). */
  solvedSe: number | null;
}

/** The lines of metrics.jsonl's text that are JSON objects, in order; blank, cut or malformed lines are skipped. */
export function parseMetricsLines(text: string): MetricsLine[] {
  const out: MetricsLine[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      continue; // a line cut by a kill, or one being appended right now
    }
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) out.push({ text: line, fields: parsed as Record<string, unknown> });
  }
  return out;
}

/** A line's number field, else null. */
export function numberField(fields: Readonly<Record<string, unknown>>, key: string): number | null {
  const v = fields[key];
  return typeof v === "number" ? v : null;
}

/** The held-out score a line carries in its `heldOut` field (version and solved rate at least), if any. */
export function heldOutOfLine(fields: Readonly<Record<string, unknown>>): HeldOutOfLine | undefined {
  const h = fields.heldOut;
  if (typeof h !== "object" || h === null) return undefined;
  const version = numberField(h as Record<string, unknown>, "version");
  const solved = numberField(h as Record<string, unknown>, "solved");
  if (version === null || solved === null) return undefined;
  return { version, solved, solvedSe: numberField(h as Record<string, unknown>, "solvedSe") };
}
