// What `arbor validate` reads and writes back: an environment's own tasks (by name), a JSONL file
// of tasks, a directory of swe-mini-format task folders, or a dataset directory whose
// `dataset.json` names its environment and task file or folder. The filtered dataset is written in
// the format it was read in, so it can be validated (or trained on) again.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import type { Environment, Task } from "../envs/env.js";
import { loadModuleEnvironment } from "../envs/module-environment.js";
import { createEnvironment, environmentNames } from "../envs/registry.js";
import { createSweMiniEnvironment } from "../envs/swe-mini/swe-mini.js";
import { loadSweTasks, TASKS_DIR } from "../envs/swe-mini/task-data.js";

/** One task to validate. */
export interface DatasetTask {
  task: Task;
  /** The dataset's own golden final answer; absent: the environment's `solveGolden`. */
  golden?: string;
  /** What the checker tests, shown to the judge panel (hidden tests, expected answer). */
  tests: string;
}

export interface Dataset {
  /** Display name (environment name or path). */
  name: string;
  env: Environment;
  tasks: DatasetTask[];
  /** Write the tasks with these ids, in the source's format, to `out` (a file or a folder); returns the path. */
  writeFiltered(keep: ReadonlySet<string>, out: string): string;
  /** File (`.jsonl`) or folder name the filtered dataset gets by default. */
  filteredName: string;
}

export interface LoadOptions {
  /** Tasks to take from an environment (default 8). */
  count?: number;
  seed?: number;
  /** Environment of JSONL lines that name none. */
  env?: string;
}

/** Load `target`: an environment name, a `.jsonl` file, a swe-mini tasks folder or a dataset folder. */
export function loadDataset(target: string, opts: LoadOptions = {}): Dataset {
  if (environmentNames.includes(target) && !existsSync(target)) {
    // An option that would not apply is refused rather than ignored.
    if (opts.env !== undefined) throw new ArborError(`validate: --env names the environment of JSONL lines that name none; '${target}' is an environment itself`, "config");
    return envDataset(target, opts);
  }
  if (!existsSync(target)) {
    throw new ArborError(`validate: '${target}' is neither an environment (${environmentNames.join(", ")}) nor an existing file or folder`, "config");
  }
  const taken = opts.count !== undefined ? "--tasks" : opts.seed !== undefined ? "--seed" : undefined;
  if (taken !== undefined) throw new ArborError(`validate: ${taken} applies to an environment's own tasks; ${target} is a dataset, validated whole`, "config");
  if (statSync(target).isFile()) return jsonlDataset(target, opts.env);
  if (opts.env !== undefined) throw new ArborError(`validate: --env names the environment of a .jsonl file's lines; ${target} is a folder (its dataset.json or its task folders say the environment)`, "config");
  const manifest = join(target, "dataset.json");
  if (existsSync(manifest)) {
    let m: { env?: unknown; tasks?: unknown };
    try {
      m = JSON.parse(readFileSync(manifest, "utf8")) as typeof m;
    } catch (e) {
      throw new ArborError(`validate: ${manifest}: not JSON (${e instanceof Error ? e.message : String(e)})`, "config");
    }
    if (typeof m.env !== "string" || typeof m.tasks !== "string") throw new ArborError(`validate: ${manifest} must name "env" and "tasks" (a .jsonl file or a folder)`, "config");
    const inner = resolve(target, m.tasks);
    if (existsSync(inner) && statSync(inner).isFile()) return jsonlDataset(inner, m.env);
    if (m.env !== "swe-mini") throw new ArborError(`validate: ${manifest}: a task folder is read for env swe-mini only, not '${m.env}'`, "config");
    return sweDataset(inner);
  }
  return sweDataset(target);
}

/** A `.ts`/`.mts`/`.js`/`.mjs` module path, with an optional `#export`: a user's environment (`env.module`). */
export function isModuleSpec(target: string): boolean {
  return /\.(m?ts|m?js)(#[A-Za-z_$][\w$]*)?$/.test(target);
}

/**
 * A user's environment module (`env.module`: its shape checked on load, envs/module-environment.ts) as a dataset:
 * `count` of its tasks, golden answers from its `solveGolden`. The filtered tasks are written as JSONL lines
 * `{id, prompt, meta}`, the task file a run's `env.tasks` reads beside the same `env.module`.
 */
export async function moduleDataset(spec: string, opts: LoadOptions = {}): Promise<Dataset> {
  const env = await loadModuleEnvironment(spec);
  const tasks = env.tasks(opts.count ?? 8, opts.seed ?? 1);
  return {
    name: env.name,
    env,
    tasks: tasks.map((task) => ({ task, tests: metaTests(task) })),
    filteredName: `${env.name}.filtered.jsonl`,
    writeFiltered: (keep, out) => writeLines(out, tasks.filter((t) => keep.has(t.id)).map((t) => JSON.stringify({ id: t.id, prompt: t.prompt, meta: t.meta }))),
  };
}

function envDataset(name: string, opts: LoadOptions): Dataset {
  const env = createEnvironment(name);
  const tasks = env.tasks(opts.count ?? 8, opts.seed ?? 1);
  const swe = name === "swe-mini" ? new Map(loadSweTasks(TASKS_DIR).map((t) => [t.id, t.hiddenTest])) : undefined;
  return {
    name,
    env,
    tasks: tasks.map((task) => ({ task, tests: swe?.get(String(task.meta.sweTask)) ?? metaTests(task) })),
    filteredName: `${name}.filtered.jsonl`,
    writeFiltered: (keep, out) => writeLines(out, tasks.filter((t) => keep.has(t.id)).map((t) => JSON.stringify({ env: name, ...t }))),
  };
}

function metaTests(task: Task): string {
  return `The checker compares the final answer with this task data: ${JSON.stringify(task.meta)}`;
}

function writeLines(out: string, lines: string[]): string {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, lines.map((l) => `${l}\n`).join(""));
  return out;
}

/** JSONL: one task a line, `{id, prompt, meta, env?, golden?}`; every line must use one environment. */
function jsonlDataset(path: string, defaultEnv?: string): Dataset {
  const lines: { text: string; task: DatasetTask }[] = [];
  let envName: string | undefined;
  readFileSync(path, "utf8")
    .split("\n")
    .forEach((text, i) => {
      if (text.trim() === "") return;
      const where = `${path}:${i + 1}`;
      let v: Record<string, unknown>;
      try {
        v = JSON.parse(text) as Record<string, unknown>;
      } catch (e) {
        throw new ArborError(`validate: ${where}: not JSON (${e instanceof Error ? e.message : String(e)})`, "config");
      }
      const env = v.env ?? defaultEnv;
      if (typeof env !== "string") throw new ArborError(`validate: ${where}: names no environment (give "env" or --env)`, "config");
      if (envName !== undefined && env !== envName) throw new ArborError(`validate: ${where}: env '${env}' differs from earlier lines' '${envName}'`, "config");
      envName = env;
      if (typeof v.id !== "string" || v.id === "") throw new ArborError(`validate: ${where}: id must be a non-empty string`, "config");
      const prompt = v.prompt as { role?: unknown; content?: unknown }[];
      if (!Array.isArray(prompt) || !prompt.every((m) => typeof m?.role === "string" && typeof m?.content === "string")) {
        throw new ArborError(`validate: ${where}: prompt must be a list of {role, content} messages`, "config");
      }
      if (typeof v.meta !== "object" || v.meta === null || Array.isArray(v.meta)) throw new ArborError(`validate: ${where}: meta must be an object`, "config");
      if (v.golden !== undefined && typeof v.golden !== "string") throw new ArborError(`validate: ${where}: golden must be a string`, "config");
      if (lines.some((l) => l.task.task.id === v.id)) throw new ArborError(`validate: ${where}: duplicate task id '${v.id}'`, "config");
      const task: Task = { id: v.id, prompt: prompt as ChatMessage[], meta: v.meta as Record<string, unknown> };
      lines.push({ text, task: { task, tests: metaTests(task), ...(typeof v.golden === "string" ? { golden: v.golden } : {}) } });
    });
  if (!envName) throw new ArborError(`validate: ${path}: no tasks`, "config");
  return {
    name: path,
    env: createEnvironment(envName),
    tasks: lines.map((l) => l.task),
    filteredName: `${basename(path).replace(/\.jsonl$/, "")}.filtered.jsonl`,
    writeFiltered: (keep, out) => writeLines(out, lines.filter((l) => keep.has(l.task.task.id)).map((l) => l.text)),
  };
}

/** A folder of swe-mini task folders (task.json, repo/, fix.patch, hidden.test.mjs). */
function sweDataset(dir: string): Dataset {
  const sweTasks = loadSweTasks(dir);
  if (sweTasks.length === 0) throw new ArborError(`validate: ${dir}: no task folders`, "config");
  const env = createSweMiniEnvironment({ tasksDir: dir });
  const tasks = env.tasks(sweTasks.length, 0).sort((a, b) => a.id.localeCompare(b.id));
  const byId = new Map(sweTasks.map((t) => [t.id, t]));
  return {
    name: dir,
    env,
    tasks: tasks.map((task) => ({ task, tests: byId.get(String(task.meta.sweTask))?.hiddenTest ?? "" })),
    filteredName: "filtered-tasks",
    writeFiltered(keep, out) {
      rmSync(out, { recursive: true, force: true });
      mkdirSync(out, { recursive: true });
      for (const t of tasks) {
        const id = String(t.meta.sweTask);
        if (keep.has(t.id)) cpSync(join(dir, id), join(out, id), { recursive: true });
      }
      return out;
    },
  };
}
