// Loads the swe-mini task data shipped under tasks/<id>/: the package as released upstream
// (repo/), the golden patch that fixes the planted bug (fix.patch; set-up applies it in reverse to
// plant the bug), the hidden test file (hidden.test.mjs) and the issue text (task.json).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { ArborError } from "../../core/errors.js";

export const TASKS_DIR = fileURLToPath(new URL("./tasks/", import.meta.url));
export const VENDOR_DIR = fileURLToPath(new URL("./vendor/", import.meta.url));

export interface SweTask {
  id: string;
  package: string;
  title: string;
  issue: string;
  /** Number of test() cases in the hidden file: all must pass. */
  hiddenTests: number;
  /** Upstream package files, repo-relative path → content. */
  files: Record<string, string>;
  /** Unified diff (paths a/… b/… relative to the repo) that fixes the bug. */
  fixPatch: string;
  /** Hidden tests; `@PKG@` stands for the repository's absolute path. */
  hiddenTest: string;
}

/** Every file under `dir`, relative path (with `/`) → content. */
export function readTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p).split(sep).join("/")] = readFileSync(p, "utf8");
    }
  };
  walk(dir);
  return out;
}

const cache = new Map<string, SweTask[]>();

/** All tasks under `dir`, sorted by id. */
export function loadSweTasks(dir: string = TASKS_DIR): SweTask[] {
  let tasks = cache.get(dir);
  if (tasks) return tasks;
  tasks = readdirSync(dir)
    .sort()
    .map((id) => {
      const d = join(dir, id);
      const meta = JSON.parse(readFileSync(join(d, "task.json"), "utf8")) as Partial<SweTask>;
      const { package: pkg, title, issue, hiddenTests } = meta;
      if (meta.id !== id || typeof pkg !== "string" || typeof title !== "string" || typeof issue !== "string" || !Number.isInteger(hiddenTests)) {
        throw new ArborError(`swe-mini: ${d}/task.json must have id '${id}', package, title, issue and hiddenTests`, "env");
      }
      return {
        id,
        package: pkg,
        title,
        issue,
        hiddenTests: hiddenTests as number,
        files: readTree(join(d, "repo")),
        fixPatch: readFileSync(join(d, "fix.patch"), "utf8"),
        hiddenTest: readFileSync(join(d, "hidden.test.mjs"), "utf8"),
      };
    });
  cache.set(dir, tasks);
  return tasks;
}
