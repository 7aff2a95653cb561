// Which process owns a run, and whether it still lives: the SQLite store records the owner of every
// run it starts, so that opening the store later can tell a run whose process died (SIGKILL, power
// loss) from one still running in another process, and end only the dead one's programs.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

/** A process, identified so that a recycled pid or a reboot is not mistaken for it. */
export interface RunOwner {
  host: string;
  /** The kernel's boot id (empty when unreadable): a reboot ends every process of the boot before. */
  bootId: string;
  pid: number;
  /** The process's start time in clock ticks since boot (-1 when unreadable): tells a recycled pid apart. */
  pidStart: number;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
}

function startTicks(pid: number): number {
  const stat = readOr(`/proc/${pid}/stat`, "");
  // Field 22 (starttime); the command name (field 2) may hold spaces, so count from its closing ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[19]);
  return Number.isInteger(ticks) ? ticks : -1;
}

const bootId = (): string => readOr("/proc/sys/kernel/random/boot_id", "").trim();

/** This process. */
export function currentOwner(): RunOwner {
  return { host: hostname(), bootId: bootId(), pid: process.pid, pidStart: startTicks(process.pid) };
}

/**
 * Whether `owner` may still be running. A process on another host cannot be checked and counts as
 * alive (its run is left alone); on this host it is alive when the boot, the pid and its start time match.
 */
export function ownerAlive(owner: RunOwner): boolean {
  if (owner.host !== hostname()) return true;
  const boot = bootId();
  if (owner.bootId !== "" && boot !== "" && owner.bootId !== boot) return false;
  try {
    process.kill(owner.pid, 0);
  } catch (e) {
    // EPERM: the pid exists but belongs to another user.
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const now = startTicks(owner.pid);
  return owner.pidStart < 0 || now < 0 || now === owner.pidStart;
}
