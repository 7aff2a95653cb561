// The environment and the tasks a run config's `env` section describes: a shipped environment by name or
// the user's module (`env.module`), and tasks drawn from it (`env.tasks: <count>`) or read from a file
// (`env.tasks: ./tasks.jsonl|.parquet`, or for swe-mini a folder of task folders, as `arbor validate`
// writes them). The run (`cli/run.ts`) and the workers of a deployment (`cli/serve-worker.ts`) build the
// environment here, so both run the same one.
import { existsSync, statSync } from "node:fs";
import { ArborError } from "../core/errors.js";
import type { EnvConfig } from "../core/config.js";
import type { Environment, Task } from "./env.js";
import { splitHeldOut, tasksAfterHeldOut } from "./held-out.js";
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

/** Tasks of a whole run, in the order the iterations take them, and its held-out tasks. */
export interface RunTasks {
  /** `perIteration × iterations` tasks: iteration k rolls out tasks[(k-1)·perIteration, k·perIteration). */
  tasks: Task[];
  /** Tasks no iteration trains on (`eval.tasks` of them; none without `eval`). */
  heldOut: Task[];
  perIteration: number;
  /** Where they came from, for the run's log line. */
  source: string;
}

/**
 * The tasks of a run of `iterations` iterations, with `heldOut` held-out tasks. A count draws `count × iterations`
 * tasks from the environment (iteration k gets the k-th slice of `env.tasks(n·iterations, seed)`) and the held-out
 * ones after them (`held-out.ts`); the held-out ones follow `heldOutAfter` iterations' tasks (default
 * `iterations`; a resumed run given more iterations keeps its first placement, and its later iterations take the
 * tasks after the held-out ones). A file holds out its last `heldOut` tasks (those whose prompt equals a
 * training task's are refused) and gives `env.perIteration` of the others per iteration (default: all of them),
 * in file order, wrapping around at the end, so more iterations than the file has slices are epochs over it.
 */
export async function runTasks(env: Environment, cfg: EnvConfig, iterations: number, heldOut = 0, heldOutAfter = iterations): Promise<RunTasks> {
  if (typeof cfg.tasks === "number") {
    const source = `${cfg.tasks} tasks per iteration (seed ${cfg.seed})`;
    if (heldOut === 0) return { tasks: env.tasks(cfg.tasks * iterations, cfg.seed), heldOut: [], perIteration: cfg.tasks, source };
    // The held-out tasks stay where the run first drew them, whatever its iterations are now (a resumed run).
    const split = splitHeldOut(env, cfg.seed, cfg.tasks * heldOutAfter, heldOut);
    const more = cfg.tasks * (iterations - heldOutAfter);
    const tasks = more > 0 ? [...split.train, ...tasksAfterHeldOut(env, cfg.seed, split, more)] : split.train.slice(0, cfg.tasks * iterations);
    return { tasks, heldOut: split.heldOut, perIteration: cfg.tasks, source };
  }
  const all = isFolder(cfg.tasks) ? env.tasks(env.taskCount ?? 0, cfg.seed).sort((a, b) => a.id.localeCompare(b.id)) : await loadTaskFile(cfg.tasks, env.name);
  if (heldOut >= all.length) throw new ArborError(`eval.tasks: ${cfg.tasks} has ${all.length} tasks; holding out ${heldOut} leaves none to train on`, "config");
  const pool = all.slice(0, all.length - heldOut);
  const held = all.slice(all.length - heldOut);
  const trainPrompts = new Set(pool.map((t) => JSON.stringify(t.prompt)));
  const same = held.find((t) => trainPrompts.has(JSON.stringify(t.prompt)));
  if (same) throw new ArborError(`eval.tasks: held-out task '${same.id}' (of the last ${heldOut} in ${cfg.tasks}) has the prompt of a training task`, "config");
  const perIteration = cfg.perIteration ?? pool.length;
  const tasks = Array.from({ length: perIteration * iterations }, (_, i) => pool[i % pool.length] as Task);
  const heldNote = heldOut > 0 ? `, the last ${heldOut} held out` : "";
  return { tasks, heldOut: held, perIteration, source: `${all.length} tasks from ${cfg.tasks}, ${perIteration} per iteration${heldNote}` };
}
