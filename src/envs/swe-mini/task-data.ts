// Loads the swe-mini task data shipped under tasks/<id>/: the package as released upstream
// (repo/), the golden patch that fixes the planted bug (fix.patch; set-up applies it in reverse to
// plant the bug), the hidden test file (hidden.test.mjs) and the issue text (task.json).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
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

/** The path of a task folder's part, or an ArborError naming the folder and the part (a folder that is no task has none). */
function taskPart(d: string, name: string): string {
  const p = join(d, name);
  if (!existsSync(p)) throw new ArborError(`swe-mini: ${d} is not a task folder: it has no ${name}`, "env");
  return p;
}

const taskFile = (d: string, name: string): string => readFileSync(taskPart(d, name), "utf8");

/** All tasks under `dir` (its folders; files beside them, a README, are no tasks), sorted by id. */
export function loadSweTasks(dir: string = TASKS_DIR): SweTask[] {
  let tasks = cache.get(dir);
  if (tasks) return tasks;
  tasks = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort()
    .map((id) => {
      const d = join(dir, id);
      let meta: Partial<SweTask>;
      try {
        meta = JSON.parse(taskFile(d, "task.json")) as Partial<SweTask>;
      } catch (e) {
        if (e instanceof ArborError) throw e;
        throw new ArborError(`swe-mini: ${d}/task.json is not JSON: ${(e as Error).message}`, "env");
      }
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
        files: readTree(taskPart(d, "repo")),
        fixPatch: taskFile(d, "fix.patch"),
        hiddenTest: taskFile(d, "hidden.test.mjs"),
      };
    });
  cache.set(dir, tasks);
  return tasks;
}
