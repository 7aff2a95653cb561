// Workspaces are named after the pid of the process that owns them, so a process that was killed
// outright (SIGKILL, OOM killer: no exit hook runs) leaves workspaces the next provider can reclaim.
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { mountsUnder, unmountWorkspaceSync } from "./workspace-mount.js";

const OWNED = /^(\d+)\./;

/** Directory-name prefix that marks a workspace as owned by this process. */
export function ownerPrefix(pid: number = process.pid): string {
  return `${pid}.`;
}

/** Whether `name` (a workspace or cgroup name) belongs to a process that no longer exists. */
export function ownedByDeadProcess(name: string): boolean {
  const m = OWNED.exec(name);
  return m !== null && !alive(Number(m[1]));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the pid exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Remove the workspaces under `root` whose owning process no longer exists; returns their names.
 * Workspaces of live processes (other runs sharing the root) are left alone.
 */
export function sweepStaleWorkspaces(root: string): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(root)) {
    const m = OWNED.exec(name);
    if (!m || alive(Number(m[1]))) continue;
    // A size-limited workspace is a tmpfs mount: unmount it first, or the rmdir fails with EBUSY.
    for (const point of mountsUnder(join(root, name))) unmountWorkspaceSync(point);
    rmSync(join(root, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}
