// Post-setup workspace hygiene (ROLL): remove the intermediate artifacts that environment set-up
// leaves behind (build caches, install logs, patch backups, which may even hold the solution),
// keep what the environment's allow-list names, and record the before/after diff.
import { ArborError } from "../../core/errors.js";
import type { Sandbox } from "../sandbox.js";
import { matchesAny } from "./glob.js";
import { diffSnapshots, snapshotWorkspace, type SnapshotEntry, type WorkspaceDiff } from "./workspace-snapshot.js";

/** Artifacts removed unless an environment overrides the list. Globs over workspace-relative paths. */
export const DEFAULT_ARTIFACTS: readonly string[] = [
  "**/*.orig",
  "**/*.rej",
  "**/*.bak",
  "**/*~",
  "**/npm-debug.log*",
  "**/yarn-error.log",
  "**/pnpm-debug.log*",
  "**/node_modules/.cache",
  "**/.cache",
  "**/.eslintcache",
  "**/*.tsbuildinfo",
  "**/.nyc_output",
  "**/coverage",
  "**/__pycache__",
  "**/*.pyc",
];

export interface CleanupRules {
  /** Globs of artifacts to remove (default {@link DEFAULT_ARTIFACTS}). */
  artifacts?: readonly string[];
  /** Globs that must stay even when they match an artifact glob. */
  keep?: readonly string[];
}

export interface CleanupReport {
  /** Entries removed (topmost path of each removed tree). */
  removed: string[];
  /** Entries that matched an artifact glob but were kept by the allow-list. */
  kept: string[];
  diff: WorkspaceDiff;
  entriesBefore: number;
  entriesAfter: number;
}

/** Each path and its ancestors, nearest first. */
function selfAndAncestors(path: string): string[] {
  const parts = path.split("/");
  return parts.map((_, i) => parts.slice(0, parts.length - i).join("/"));
}

/** Decide what to remove from a snapshot (pure). */
export function planCleanup(entries: readonly SnapshotEntry[], rules: CleanupRules): { remove: string[]; kept: string[] } {
  const artifacts = rules.artifacts ?? DEFAULT_ARTIFACTS;
  const keep = rules.keep ?? [];
  const isArtifact = (p: string): boolean => selfAndAncestors(p).some((q) => matchesAny(q, artifacts));
  const isKept = (p: string): boolean => selfAndAncestors(p).some((q) => matchesAny(q, keep));
  const keptPaths = entries.filter((e) => isArtifact(e.path) && isKept(e.path)).map((e) => e.path);
  // A directory holding a kept entry cannot go as a whole: its other artifacts go one by one.
  const holdsKept = (dir: string): boolean => keptPaths.some((k) => k.startsWith(`${dir}/`));
  const remove: string[] = [];
  for (const e of entries) {
    if (!isArtifact(e.path) || isKept(e.path) || holdsKept(e.path)) continue;
    if (remove.some((r) => e.path.startsWith(`${r}/`))) continue;
    remove.push(e.path);
  }
  return { remove, kept: keptPaths };
}

/** Snapshot, remove artifacts inside the sandbox, snapshot again and report the diff. */
export async function cleanWorkspace(sandbox: Sandbox, rules: CleanupRules = {}): Promise<CleanupReport> {
  const before = await snapshotWorkspace(sandbox);
  const { remove, kept } = planCleanup(before, rules);
  for (let i = 0; i < remove.length; i += 200) {
    const batch = remove.slice(i, i + 200).map((p) => `/workspace/${p}`);
    const r = await sandbox.exec(["/bin/rm", "-rf", "--", ...batch]);
    if (r.exitCode !== 0) {
      throw new ArborError(`hygiene: removing artifacts in ${sandbox.programId} failed: ${r.stderr.trim().slice(0, 300)}`, "sandbox");
    }
  }
  const after = await snapshotWorkspace(sandbox);
  return { removed: remove, kept, diff: diffSnapshots(before, after), entriesBefore: before.length, entriesAfter: after.length };
}
