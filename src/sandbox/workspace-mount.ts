// Size-limited workspaces: a per-sandbox tmpfs mounted (by the host) on the workspace directory,
// so a program that fills its disk gets ENOSPC at `size` instead of filling the host's disk. The
// host keeps reading and writing the same path. Needs mount rights (root); otherwise the caller
// falls back to a plain directory and says so.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { statfs } from "node:fs/promises";
import { sep } from "node:path";

const MOUNT = "/usr/bin/mount";
const UMOUNT = "/usr/bin/umount";

/** Mount a tmpfs of `sizeMb` on `dir` owned by `uid` (or the caller). Returns an error message, or undefined on success. */
export function mountWorkspaceTmpfs(dir: string, sizeMb: number, uid: number | null): string | undefined {
  const opts = [`size=${Math.floor(sizeMb * 1024 * 1024)}`, "mode=0755", "nosuid", "nodev"];
  if (uid !== null) opts.push(`uid=${uid}`, `gid=${uid}`);
  const r = spawnSync(MOUNT, ["-t", "tmpfs", "-o", opts.join(","), "arbor-workspace", dir], {
    encoding: "utf8",
    timeout: 10_000,
  });
  if (r.status === 0) return undefined;
  return (r.stderr || r.error?.message || `exit ${r.status}`).trim().split("\n")[0];
}

/** Unmount `dir` (lazily if still busy: the mount disappears once its last user is gone). */
export function unmountWorkspace(dir: string): void {
  const r = spawnSync(UMOUNT, [dir], { timeout: 10_000 });
  if (r.status !== 0) spawnSync(UMOUNT, ["-l", dir], { timeout: 10_000 });
}

/** Mount points at or below `root` (from this process's mount table), deepest first. */
export function mountsUnder(root: string): string[] {
  const out: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const field = line.split(" ")[4];
    if (!field) continue;
    const point = field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    if (point === root || point.startsWith(root + sep)) out.push(point);
  }
  return out.sort((a, b) => b.length - a.length);
}

/** Bytes still free on the filesystem holding `dir` (undefined if it cannot be read). */
export async function freeBytes(dir: string): Promise<number | undefined> {
  try {
    const s = await statfs(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}
