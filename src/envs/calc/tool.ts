// The calc tool: validates an arithmetic expression, then evaluates it with bc inside the program's
// sandbox, so even a tool that misbehaves is confined to the sandbox and its limits.
import type { Sandbox } from "../../sandbox/sandbox.js";
import type { Tool, ToolResult } from "../env.js";
import { CALC_ALLOWED } from "./expr.js";

export const CALC_MAX_INPUT = 200;
const BC = "/usr/bin/bc";

/** Reject anything but a short arithmetic expression; returns the reason, or null when valid. */
export function validateCalcInput(expr: string): string | null {
  if (expr.length === 0) return "calc: empty expression (example: 12*7+3)";
  if (expr.length > CALC_MAX_INPUT) return `calc: expression too long (${expr.length} chars, max ${CALC_MAX_INPUT})`;
  if (!CALC_ALLOWED.test(expr)) {
    const i = [...expr].findIndex((ch) => !CALC_ALLOWED.test(ch));
    const bad = JSON.stringify([...expr][i] ?? "?");
    return `calc: invalid character ${bad} at position ${i}; only digits, spaces, + - * / ( ) are allowed`;
  }
  return null;
}

/** bc prefixes its messages with "(standard_in) 1: " or "Runtime error (func=(main), adr=5): ". */
function bcMessage(stderr: string): string {
  const line = stderr.trim().split("\n")[0] ?? "";
  return line.replace(/^\(standard_in\) \d+: /, "").replace(/^Runtime error \(.*?\): /, "");
}

/** Create the calc tool. Sandbox failures (cannot start, destroyed) propagate as exceptions. */
export function createCalcTool(): Tool {
  return {
    name: "calc",
    description: "Evaluate an integer arithmetic expression: digits, spaces, + - * / ( ); / is integer division.",
    async run(input: string, sandbox: Sandbox): Promise<ToolResult> {
      const expr = input.trim();
      const invalid = validateCalcInput(expr);
      if (invalid) return { ok: false, output: invalid };
      // BC_LINE_LENGTH=0: never wrap long numbers with backslash-newline.
      const r = await sandbox.exec([BC, "-q"], { stdin: `${expr}\n`, env: { BC_LINE_LENGTH: "0" } });
      const stderr = r.stderr.trim();
      if (r.timedOut) return { ok: false, crashed: true, output: `calc crashed: timed out after ${r.durationMs} ms` };
      if (r.signal) return { ok: false, crashed: true, output: `calc crashed: bc was killed by ${r.signal}` };
      if (r.exitCode !== 0) {
        const why = stderr ? `: ${stderr.split("\n")[0]}` : "";
        return { ok: false, crashed: true, output: `calc crashed: bc exited with code ${r.exitCode}${why}` };
      }
      if (stderr) return { ok: false, output: `calc error: ${bcMessage(stderr)}` };
      const out = r.stdout.trim();
      if (!/^-?\d+$/.test(out)) return { ok: false, output: `calc error: unexpected output ${JSON.stringify(out.slice(0, 100))}` };
      return { ok: true, output: out };
    },
  };
}
