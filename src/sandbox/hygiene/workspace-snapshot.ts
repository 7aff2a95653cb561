// Snapshot of a sandbox workspace (every entry with its type and content hash), taken from inside
// the sandbox with node so it works for any provider, and the diff between two snapshots.
import { ArborError } from "../../core/errors.js";
import type { Sandbox } from "../sandbox.js";

export type EntryType = "file" | "dir" | "symlink" | "other";

export interface SnapshotEntry {
  /** Path relative to the workspace, `/`-separated. */
  path: string;
  type: EntryType;
  /** sha256 of a file's bytes, a symlink's target; "" for directories. */
  digest: string;
}

export interface WorkspaceDiff {
  added: string[];
  removed: string[];
  changed: string[];
}

/** Most entries a snapshot accepts; past it the workspace is not a task workspace any more. */
export const MAX_SNAPSHOT_ENTRIES = 50_000;

const SCRIPT = `
const fs = require("fs"), path = require("path"), crypto = require("crypto");
const [root, max] = [process.argv[1], Number(process.argv[2])];
const out = [];
function walk(dir, rel) {
  const names = fs.readdirSync(dir).sort();
  for (const name of names) {
    if (out.length >= max) { process.stderr.write("too many entries"); process.exit(3); }
    const p = path.join(dir, name), r = rel ? rel + "/" + name : name;
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink()) out.push([r, "symlink", fs.readlinkSync(p)]);
    else if (st.isDirectory()) { out.push([r, "dir", ""]); walk(p, r); }
    else if (st.isFile()) out.push([r, "file", crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex")]);
    else out.push([r, "other", ""]);
  }
}
walk(root, "");
process.stdout.write(JSON.stringify(out));
`;

/** List every entry under `/workspace` (sorted by path). */
export async function snapshotWorkspace(sandbox: Sandbox, root = "/workspace"): Promise<SnapshotEntry[]> {
  const r = await sandbox.exec(["/usr/bin/node", "-e", SCRIPT, root, String(MAX_SNAPSHOT_ENTRIES)]);
  if (r.exitCode === 3) {
    throw new ArborError(`hygiene: workspace of ${sandbox.programId} has more than ${MAX_SNAPSHOT_ENTRIES} entries`, "sandbox");
  }
  if (r.exitCode !== 0) {
    throw new ArborError(`hygiene: snapshot of ${sandbox.programId} failed (exit ${r.exitCode ?? r.signal}): ${r.stderr.trim().slice(0, 300)}`, "sandbox");
  }
  const rows = JSON.parse(r.stdout) as [string, EntryType, string][];
  return rows.map(([path, type, digest]) => ({ path, type, digest })).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** What changed from `before` to `after`. */
export function diffSnapshots(before: readonly SnapshotEntry[], after: readonly SnapshotEntry[]): WorkspaceDiff {
  const a = new Map(before.map((e) => [e.path, e]));
  const b = new Map(after.map((e) => [e.path, e]));
  const added = [...b.keys()].filter((p) => !a.has(p));
  const removed = [...a.keys()].filter((p) => !b.has(p));
  const changed = [...b.values()]
    .filter((e) => {
      const old = a.get(e.path);
      return old !== undefined && (old.type !== e.type || old.digest !== e.digest);
    })
    .map((e) => e.path);
  return { added, removed, changed };
}
