// Size-limited workspaces: a per-sandbox tmpfs mounted (by the host) on the workspace directory,
// so a program that fills its disk gets ENOSPC at `size` instead of filling the host's disk. The
// host keeps reading and writing the same path. Needs mount rights (root); otherwise the caller
// falls back to a plain directory and says so.
import { execFile, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { statfs } from "node:fs/promises";
import { sep } from "node:path";

const MOUNT = "/usr/bin/mount";
const UMOUNT = "/usr/bin/umount";

/** Run mount/umount without blocking the event loop (in-process engines and other programs keep going). */
function run(cmd: string, args: string[]): Promise<{ ok: boolean; message: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { encoding: "utf8", timeout: 10_000 }, (err, _stdout, stderr) => {
      resolve({ ok: err === null, message: (stderr || err?.message || "").trim().split("\n")[0] ?? "" });
    });
  });
}

/** Mount a tmpfs of `sizeMb` on `dir` owned by `uid` (or the caller). Resolves to an error message, or undefined on success. */
export async function mountWorkspaceTmpfs(dir: string, sizeMb: number, uid: number | null): Promise<string | undefined> {
  const opts = [`size=${Math.floor(sizeMb * 1024 * 1024)}`, "mode=0755", "nosuid", "nodev"];
  if (uid !== null) opts.push(`uid=${uid}`, `gid=${uid}`);
  const r = await run(MOUNT, ["-t", "tmpfs", "-o", opts.join(","), "arbor-workspace", dir]);
  return r.ok ? undefined : r.message || "mount failed";
}

/** Unmount `dir` (lazily if still busy: the mount disappears once its last user is gone). */
export async function unmountWorkspace(dir: string): Promise<void> {
  if (!(await run(UMOUNT, [dir])).ok) await run(UMOUNT, ["-l", dir]);
}

/** {@link unmountWorkspace} for exit handlers and start-up clean-up, where nothing else runs yet or any more. */
export function unmountWorkspaceSync(dir: string): void {
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
