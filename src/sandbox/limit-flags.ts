// Decides which sandbox limit (if any) stopped a command, from the kernel's own evidence: cgroup
// event counters (OOM kills, refused forks), the signal (SIGXCPU, SIGXFSZ), a full size-limited
// workspace, the wall-clock kill. Where the kernel gives no counter (a per-process RLIMIT_AS makes
// malloc fail instead of OOM-killing; RLIMIT_NPROC makes fork fail), the error text the C library
// and common runtimes print for ENOMEM / EAGAIN-on-fork is the evidence.
import type { SandboxLimitKind } from "./sandbox.js";

export interface LimitEvidence {
  signal: string | null;
  exitCode: number | null;
  stderr: string;
  timedOut: boolean;
  /** Growth of the sandbox cgroup's OOM-kill counter during the command. */
  oomKills: number;
  /** Growth of the sandbox cgroup's refused-fork counter during the command. */
  pidsRefused: number;
  /** The size-limited workspace or /tmp had (almost) no room left after the command. */
  diskFull: boolean;
}

const ENOMEM_TEXT = /out of memory|cannot allocate memory|memory exhausted|MemoryError|std::bad_alloc|heap out of memory|failed to allocate/i;
const FORK_TEXT = /fork: (retry: )?Resource temporarily unavailable|Cannot fork|can't fork|fork failed/i;
const DISK_TEXT = /No space left on device|File too large|Disk quota exceeded/i;
// E2BIG from an execve inside the sandbox (a command that builds a too-long argv itself).
const ARGS_TEXT = /Argument list too long/;

/** The limit a finished command ran into, most specific first (see ExecResult.limit). */
export function classifyLimit(e: LimitEvidence): SandboxLimitKind | undefined {
  const failed = e.exitCode !== 0;
  if (e.oomKills > 0 || (failed && ENOMEM_TEXT.test(e.stderr))) return "memory";
  if (e.pidsRefused > 0 || (failed && FORK_TEXT.test(e.stderr))) return "processes";
  if (e.signal === "SIGXFSZ" || (failed && (e.diskFull || DISK_TEXT.test(e.stderr)))) return "disk";
  if (failed && ARGS_TEXT.test(e.stderr)) return "arguments";
  if (e.signal === "SIGXCPU") return "cpu";
  if (e.timedOut) return "wall";
  return undefined;
}
