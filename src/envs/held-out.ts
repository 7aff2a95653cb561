// The held-out task set of a run (issue 20): tasks of the environment that no iteration trains on. Environments
// give tasks as a deterministic list per seed whose longer draws extend shorter ones, so the run's training
// tasks are the first `train` of the list and the held-out ones come after them. Distinct positions can still
// hold the same question (calc draws small expressions: `3+4` may come twice), so a candidate whose prompt
// equals a training task's (or an earlier held-out one's) is skipped: disjoint by content, not only by id.
import { ArborError } from "../core/errors.js";
import type { Environment, Task } from "./env.js";

/** The training tasks and the held-out tasks drawn after them. */
export interface TaskSplit {
  train: Task[];
  heldOut: Task[];
  /** Position in the environment's list after the last task the held-out draw looked at. */
  next: number;
}

/** Tasks looked at beyond the training ones before giving up (generated environments have no end). */
function drawLimit(env: Environment, train: number, heldOut: number): number {
  const wanted = train + 4 * heldOut + 64;
  return env.taskCount === undefined ? wanted : Math.min(wanted, env.taskCount);
}

const promptKey = (t: Task): string => JSON.stringify(t.prompt);

/**
 * The first `train` tasks of `env` for `seed`, and `heldOut` tasks after them whose prompts differ from every
 * training task's and from each other. Throws an {@link ArborError} naming `eval.tasks` when the environment
 * has too few distinct tasks left.
 */
export function splitHeldOut(env: Environment, seed: number, train: number, heldOut: number): TaskSplit {
  const limit = drawLimit(env, train, heldOut);
  if (train + heldOut > limit) {
    throw new ArborError(`eval.tasks: ${env.name} has ${env.taskCount ?? limit} tasks; ${train} are trained on, so at most ${Math.max(0, limit - train)} can be held out, not ${heldOut}`, "config");
  }
  const all = env.tasks(limit, seed);
  const trainTasks = all.slice(0, train);
  const seen = new Set(trainTasks.map(promptKey));
  const out: Task[] = [];
  let next = train;
  for (; next < all.length && out.length < heldOut; next++) {
    const t = all[next] as Task;
    const k = promptKey(t);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(t);
  }
  if (out.length < heldOut) {
    throw new ArborError(`eval.tasks: only ${out.length} of the ${limit - train} ${env.name} tasks after the ${train} training ones differ from them; ask for at most ${out.length}`, "config");
  }
  return { train: trainTasks, heldOut: out, next };
}

/**
 * `count` more training tasks after a split (a resumed run given more iterations than it started with): the
 * tasks after the held-out ones, skipping any whose prompt is a held-out task's, so the held-out set stays where the
 * run drew it and is never trained on. Throws an {@link ArborError} when the environment has too few left.
 */
export function tasksAfterHeldOut(env: Environment, seed: number, split: TaskSplit, count: number): Task[] {
  const held = new Set(split.heldOut.map(promptKey));
  const wanted = split.next + count + 4 * split.heldOut.length + 64;
  const limit = env.taskCount === undefined ? wanted : Math.min(wanted, env.taskCount);
  const out = env
    .tasks(limit, seed)
    .slice(split.next)
    .filter((t) => !held.has(promptKey(t)))
    .slice(0, count);
  if (out.length < count) throw new ArborError(`iterations: ${env.name} has ${out.length} tasks left after the held-out ones, not the ${count} more iterations need`, "config");
  return out;
}
