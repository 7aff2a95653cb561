// Reads the host process table (/proc) to find a sandbox's processes by its pid namespace, so that
// teardown can prove nothing of the sandbox is left running.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/** Pid-namespace inode of process `pid`, or undefined when it is gone (or a zombie). */
export function pidNamespaceOf(pid: number): number | undefined {
  try {
    const m = /^pid:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/ns/pid`));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * True for a zombie (or vanished) process. bwrap's monitor can exit before reaping the sandbox's
 * pid 1, which then waits as a zombie until the host's init reaps it; it runs nothing any more.
 */
function isDead(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state === "Z" || state === "X";
  } catch {
    return true;
  }
}

/** Pids of the live (non-zombie) processes in pid namespace `nsInode`. */
export function processesInPidNamespace(nsInode: number): number[] {
  const out: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const pid = Number(e);
    if (pidNamespaceOf(pid) === nsInode && !isDead(pid)) out.push(pid);
  }
  return out;
}

/** SIGKILL every live process in pid namespace `nsInode`; returns how many were signalled. */
export function killPidNamespace(nsInode: number): number {
  const pids = processesInPidNamespace(nsInode);
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // exited meanwhile
    }
  }
  return pids.length;
}

/**
 * SIGKILL what is left in a sandbox's pid namespace, known by its pid 1 (host pid) and namespace inode;
 * returns how many processes were signalled. Only while that pid 1 is still in that namespace: once it is
 * gone the kernel has killed the rest, and once they are reaped the inode number can name a newer namespace —
 * another sandbox's, of this process or another — whose processes a scan by the number alone would kill.
 */
export function killSandboxLeftovers(sandbox: { initPid: number; pidNs: number }): number {
  if (pidNamespaceOf(sandbox.initPid) !== sandbox.pidNs) return 0;
  return killPidNamespace(sandbox.pidNs);
}
