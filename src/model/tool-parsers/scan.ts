// Text scanning shared by the tool-call parsers: how much of a buffer may still become a marker
// (and so must be held back while streaming), where a JSON value that starts at a position ends
// (so a call is decided the moment its JSON closes, not at the end of the answer), and the check
// that a parsed value is a call of a declared tool.
import type { ParsedCall } from "./tool-parser.js";

/** Longest suffix of `text` that is a proper prefix of one of `markers` (it may still become it). */
export function heldPrefix(text: string, ...markers: string[]): number {
  let best = 0;
  for (const marker of markers) {
    for (let n = Math.min(marker.length - 1, text.length); n > best; n--) {
      if (text.endsWith(marker.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

/** Index after the whitespace at `from`. */
export function skipSpace(text: string, from: number): number {
  let i = from;
  while (i < text.length && /\s/.test(text[i] as string)) i++;
  return i;
}

/**
 * End (exclusive) of the JSON object or array that opens at `start` (`{` or `[`), found by
 * matching brackets outside strings; -1 when the text ends before it closes. Validity is left
 * to JSON.parse: this only says where the value would end.
 */
export function jsonEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === "{" || ch === "[") depth++;
    else if (ch === "}" || ch === "]") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** Start/end of each top-level element of the JSON array text `text` (already known to parse). */
export function arrayElementSpans(text: string): { start: number; end: number }[] {
  const spans: { start: number; end: number }[] = [];
  let i = skipSpace(text, 1);
  while (i < text.length && text[i] !== "]") {
    const start = i;
    const ch = text[i];
    if (ch === "{" || ch === "[") i = jsonEnd(text, i);
    else if (ch === '"') {
      i++;
      while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
      i++;
    } else while (i < text.length && !/[\s,\]]/.test(text[i] as string)) i++;
    spans.push({ start, end: i });
    i = skipSpace(text, i);
    if (text[i] === ",") i = skipSpace(text, i + 1);
  }
  return spans;
}

/** `text` parsed as JSON, or undefined when it is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * JSON text of `v` as Python's `json.dumps(v, ensure_ascii=False)` writes it (", " and ": "
 * separators): what vLLM's parsers return as `arguments` and what chat templates' `tojson` renders,
 * so a call the client sends back re-renders to the text a model wrote in that style.
 */
export function pythonJsonDumps(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pythonJsonDumps).join(", ")}]`;
  if (isPlainObject(v)) return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pythonJsonDumps(x)}`).join(", ")}}`;
  return JSON.stringify(v) ?? "null";
}

/**
 * The call a parsed JSON value describes — `{"name": <declared>, <argsKey>: {object}}` — with its
 * arguments as Python-style JSON text ({@link pythonJsonDumps}); undefined when it is not one (that
 * text then stays content).
 */
export function jsonCall(value: unknown, names: ReadonlySet<string>, argsKeys: readonly string[], id: string): ParsedCall | undefined {
  if (!isPlainObject(value)) return undefined;
  const name = value.name;
  if (typeof name !== "string" || !names.has(name)) return undefined;
  const key = argsKeys.find((k) => k in value);
  if (key === undefined) return undefined;
  const args = value[key];
  if (!isPlainObject(args)) return undefined;
  return { id, type: "function", function: { name, arguments: pythonJsonDumps(args) } };
}
