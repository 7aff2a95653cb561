// How a finished sandbox command ended, in the terms the agent layer records: out of memory (the
// `sandbox_oom` termination), a crash (killed by a signal), the wall-clock kill, or a plain exit.
import type { ExecResult } from "../sandbox/sandbox.js";

export type ExecEnd = "ok" | "failed" | "crashed" | "timeout" | "oom";

// What allocators print when RLIMIT_AS refuses memory: V8 ("Fatal process OOM", "heap out of
// memory"), glibc/coreutils ("Cannot allocate memory"), C++ (bad_alloc), Python (MemoryError).
const OOM_TEXT = /Fatal process OOM|JavaScript heap out of memory|out of memory|Cannot allocate memory|std::bad_alloc|\bMemoryError\b/i;

/** True when `text` (a command's stderr or a tool's report) says memory ran out. */
export function mentionsOutOfMemory(text: string): boolean {
  return OOM_TEXT.test(text);
}

/**
 * Classify a finished exec. The provider's own verdict (`limit: "memory"`, from cgroup OOM-kill
 * counters) wins; with rlimits only, an allocation refused by RLIMIT_AS shows in stderr instead.
 */
export function classifyExec(r: ExecResult): ExecEnd {
  if (r.limit === "memory") return "oom";
  if (r.timedOut || r.limit === "wall") return "timeout";
  if ((r.signal !== null || (r.exitCode ?? 0) !== 0) && mentionsOutOfMemory(r.stderr)) return "oom";
  if (r.signal !== null) return "crashed";
  return r.exitCode === 0 ? "ok" : "failed";
}

/** A tool result for a finished exec: output is stdout, or the reason it failed. */
export function execToolResult(name: string, r: ExecResult): { output: string; ok: boolean; crashed?: boolean; oom?: boolean } {
  const stderr = r.stderr.trim().split("\n").slice(-3).join("\n");
  switch (classifyExec(r)) {
    case "ok":
      return { output: r.stdout, ok: true };
    case "failed":
      return { output: `${name} exited with code ${r.exitCode}${stoppedBy(r)}${stderr ? `: ${stderr}` : ""}`, ok: false };
    case "oom":
      return { output: `${name} ran out of memory${stderr ? `: ${stderr}` : ""}`, ok: false, oom: true };
    case "timeout":
      return { output: `${name} was killed after ${Math.round(r.durationMs)} ms (wall-clock limit)`, ok: false, crashed: true };
    case "crashed":
      return { output: `${name} was killed by ${r.signal}${stoppedBy(r)}${stderr ? `: ${stderr}` : ""}`, ok: false, crashed: true };
  }
}

/**
 * The sandbox limit that stopped a command (a fork bomb at the process cap, a disk fill at the
 * workspace size, a busy loop at the CPU limit), named in the tool's output so that the attempt
 * is recorded in the trajectory's tool event and the model sees why.
 */
function stoppedBy(r: ExecResult): string {
  return r.limit === "processes" || r.limit === "disk" || r.limit === "cpu" ? ` (stopped by the sandbox's ${r.limit} limit)` : "";
}
