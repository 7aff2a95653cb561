// The statistics of held-out evaluation (issue 20), I/O-free: the solved rate of one policy version with its
// standard error, and the paired difference between two versions scored on the same (task, sample) pairs
// with the same sampling seeds. Samples of one task are not independent (an easy task is solved by all of
// them), so the unit is the task: each task's solved fraction over its samples, the rate their mean, the
// standard error the tasks' sample standard deviation over √tasks (with one sample per task it is the usual
// Bernoulli standard error with n − 1). The paired difference is the mean of the per-task differences and its
// standard error theirs: what two versions share (the tasks' difficulty, the seeds) cancels out of it.
import { ArborError } from "../core/errors.js";

/** One held-out program's result: which task and sample it was and whether it solved the task. */
export interface HeldOutSample {
  taskId: string;
  sample: number;
  solved: boolean;
}

/** A mean with its standard error. */
export interface MeanSe {
  mean: number;
  se: number;
  /** Units it is the mean of (tasks). */
  n: number;
}

/** Arithmetic mean (0 for no values). */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Sample variance (n − 1 in the denominator); 0 for fewer than two values. */
export function sampleVariance(xs: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const m = mean(xs);
  return xs.reduce((a, x) => a + (x - m) ** 2, 0) / (n - 1);
}

/** Standard error of the mean: sample standard deviation (n − 1) over √n; 0 for fewer than two values. */
export function standardError(xs: readonly number[]): number {
  return xs.length < 2 ? 0 : Math.sqrt(sampleVariance(xs) / xs.length);
}

/** Mean and standard error of `xs`. */
export function meanSe(xs: readonly number[]): MeanSe {
  return { mean: mean(xs), se: standardError(xs), n: xs.length };
}

/** Paired difference `after − before`, element by element: its mean and standard error. */
export function pairedDifference(before: readonly number[], after: readonly number[]): MeanSe {
  if (before.length !== after.length) throw new ArborError(`paired difference: ${before.length} values before but ${after.length} after`, "invalid_request");
  return meanSe(after.map((a, i) => a - (before[i] as number)));
}

/** Each task's solved fraction over its samples, by task id (tasks in order of first appearance). */
export function solvedByTask(samples: readonly HeldOutSample[]): Map<string, number> {
  const counts = new Map<string, { solved: number; n: number; seen: Set<number> }>();
  for (const s of samples) {
    const c = counts.get(s.taskId) ?? { solved: 0, n: 0, seen: new Set<number>() };
    if (c.seen.has(s.sample)) throw new ArborError(`held-out evaluation: task '${s.taskId}' sample ${s.sample} scored twice`, "invalid_request");
    c.seen.add(s.sample);
    c.n++;
    if (s.solved) c.solved++;
    counts.set(s.taskId, c);
  }
  return new Map([...counts].map(([id, c]) => [id, c.solved / c.n]));
}

/** The solved rate of one version: mean of the tasks' solved fractions, with its standard error over tasks. */
export function solvedRate(samples: readonly HeldOutSample[]): MeanSe {
  return meanSe([...solvedByTask(samples).values()]);
}

/**
 * The paired difference `after − before` of solved rates over the same tasks and samples (throws when the two
 * did not score the same (task, sample) pairs: then they do not pair).
 */
export function pairedSolvedDifference(before: readonly HeldOutSample[], after: readonly HeldOutSample[]): MeanSe {
  const key = (s: HeldOutSample): string => `${s.taskId}\u0000${s.sample}`;
  const a = new Set(before.map(key));
  const b = new Set(after.map(key));
  if (a.size !== b.size || [...a].some((k) => !b.has(k))) {
    throw new ArborError(`held-out evaluation: the versions scored different (task, sample) pairs (${a.size} and ${b.size}); they cannot be paired`, "invalid_request");
  }
  const x = solvedByTask(before);
  const y = solvedByTask(after);
  const ids = [...x.keys()];
  return pairedDifference(
    ids.map((id) => x.get(id) as number),
    ids.map((id) => y.get(id) as number),
  );
}
