// Which paths an agent must not touch (hidden tests, grader files, protected test files) and the
// violations a list of traced file accesses makes against them.
import type { AccessMode, FileAccess } from "./strace-parse.js";
import { matchesAny } from "./glob.js";

/** A protected path pattern (absolute glob inside the sandbox). */
export interface ProtectedPath {
  glob: string;
  /** "any": reading is already a violation (grader files); "write": only changing it is. */
  deny: "any" | "write";
}

/** One recorded breach of the hygiene rules. */
export interface HygieneViolation {
  path: string;
  mode: AccessMode;
  syscall: string;
  /** The protected pattern it matched. */
  rule: string;
  /** Which tool run made it (0-based count of traced tool runs in this sandbox). */
  toolRun: number;
  /** The tool and its input, for the record. */
  tool: string;
  input: string;
}

/** The accesses that break `rules`, one per distinct (path, mode). */
export function findViolations(
  accesses: readonly FileAccess[],
  rules: readonly ProtectedPath[],
  origin: { toolRun: number; tool: string; input: string },
): HygieneViolation[] {
  const seen = new Set<string>();
  const out: HygieneViolation[] = [];
  for (const a of accesses) {
    const rule = rules.find((r) => (r.deny === "any" || a.mode === "write") && matchesAny(a.path, [r.glob]));
    if (!rule) continue;
    const key = `${a.mode} ${a.path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ path: a.path, mode: a.mode, syscall: a.syscall, rule: rule.glob, ...origin });
  }
  return out;
}
