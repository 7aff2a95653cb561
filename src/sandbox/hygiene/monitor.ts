// The per-program hygiene monitor: every tool command runs traced, and each access to a
// protected path becomes a recorded violation (ROLL: agents learned to read and edit tests).
import type { ExecOptions, ExecResult, Sandbox } from "../sandbox.js";
import { findViolations, type HygieneViolation, type ProtectedPath } from "./access-policy.js";
import { TRACE_DIR_GLOB, tracedExec } from "./traced-exec.js";

/** Tool runs whose trace was lost (killed by a limit): their accesses could not be checked. */
export interface UnverifiedRun {
  toolRun: number;
  tool: string;
  input: string;
}

/** Watches one sandbox's tool commands against a set of protected paths. */
export class HygieneMonitor {
  readonly violations: HygieneViolation[] = [];
  readonly unverified: UnverifiedRun[] = [];
  private runs = 0;

  readonly rules: readonly ProtectedPath[];

  constructor(rules: readonly ProtectedPath[]) {
    // The trace file lives in the sandbox's /tmp (same uid): touching it is tampering with the watch.
    this.rules = rules.length === 0 ? [] : [...rules, { glob: TRACE_DIR_GLOB, deny: "any" }];
  }

  /** Run a tool's command traced; records violations and returns the command's own result. */
  async exec(sandbox: Sandbox, argv: string[], opts: ExecOptions, origin: { tool: string; input: string }): Promise<ExecResult> {
    const toolRun = this.runs++;
    if (this.rules.length === 0) return sandbox.exec(argv, opts);
    const t = await tracedExec(sandbox, argv, opts);
    if (!t.traceComplete) this.unverified.push({ toolRun, ...origin });
    this.violations.push(...findViolations(t.accesses, this.rules, { toolRun, ...origin }));
    return t.result;
  }
}
