// The environment and the tasks a run config's `env` section describes: a shipped environment by name or
// the user's module (`env.module`), and tasks drawn from it (`env.tasks: <count>`) or read from a file
// (`env.tasks: ./tasks.jsonl|.parquet`, or for swe-mini a folder of task folders, as `arbor validate`
// writes them). The run (`cli/run.ts`) and the workers of a deployment (`cli/serve-worker.ts`) build the
// environment here, so both run the same one.
import { existsSync, statSync } from "node:fs";
import { ArborError } from "../core/errors.js";
import type { EnvConfig } from "../core/config.js";
import type { Environment, Task } from "./env.js";
import { loadModuleEnvironment } from "./module-environment.js";
import { createEnvironment, type EnvironmentOptions } from "./registry.js";
import { loadTaskFile } from "./task-file.js";

/** The environment of `cfg`: `env.module`'s export when given, else the shipped one named `env.name`. */
export async function environmentFromConfig(cfg: EnvConfig): Promise<Environment> {
  const opts: EnvironmentOptions = { ...(cfg.hygiene ? { hygiene: cfg.hygiene } : {}) };
  if (cfg.module !== undefined) return loadModuleEnvironment(cfg.module, opts);
  if (typeof cfg.tasks === "string" && isFolder(cfg.tasks)) {
    if (cfg.name !== "swe-mini") throw new ArborError(`env.tasks: ${cfg.tasks} is a folder; a folder of task folders is read for env swe-mini only (use a .jsonl or .parquet file)`, "config");
    return createEnvironment(cfg.name, { ...opts, tasksDir: cfg.tasks });
  }
  return createEnvironment(cfg.name, opts);
}

function isFolder(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** Tasks of a whole run, in the order the iterations take them. */
export interface RunTasks {
  /** `perIteration × iterations` tasks: iteration k rolls out tasks[(k-1)·perIteration, k·perIteration). */
  tasks: Task[];
  perIteration: number;
  /** Where they came from, for the run's log line. */
  source: string;
}

/**
 * The tasks of a run of `iterations` iterations. A count draws `count × iterations` tasks from the environment
 * (iteration k gets the k-th slice of `env.tasks(n·iterations, seed)`); a file gives `env.perIteration` tasks
 * per iteration (default: all of the file), taken in file order and wrapping around at the end of the file, so
 * more iterations than the file has slices are epochs over it.
 */
export async function runTasks(env: Environment, cfg: EnvConfig, iterations: number): Promise<RunTasks> {
  if (typeof cfg.tasks === "number") return { tasks: env.tasks(cfg.tasks * iterations, cfg.seed), perIteration: cfg.tasks, source: `${cfg.tasks} tasks per iteration (seed ${cfg.seed})` };
  const pool = isFolder(cfg.tasks) ? env.tasks(env.taskCount ?? 0, cfg.seed).sort((a, b) => a.id.localeCompare(b.id)) : await loadTaskFile(cfg.tasks, env.name);
  if (pool.length === 0) throw new ArborError(`env.tasks: ${cfg.tasks}: no tasks`, "config");
  const perIteration = cfg.perIteration ?? pool.length;
  const tasks = Array.from({ length: perIteration * iterations }, (_, i) => pool[i % pool.length] as Task);
  return { tasks, perIteration, source: `${pool.length} tasks from ${cfg.tasks}, ${perIteration} per iteration` };
}
