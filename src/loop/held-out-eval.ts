// Held-out evaluation per policy version (issue 20): a fixed task set no iteration trains on
// (envs/held-out.ts), `samples` programs per task, scored for version 0 before training and then every
// `every` versions and the last, each (task, sample) with the same sampling seed at every version so that
// versions compare pairwise (held-out-stats.ts). How one program runs is injected (`run`): in a run, the
// rollout's own program path through the gateway on the engines (held-out-programs.ts), never a batch.
// A version whose programs did not all end with an outcome (the run was stopped mid-evaluation) gets no score:
// a solved rate over part of the tasks is not comparable with the others. It is listed as incomplete instead.
import { ArborError } from "../core/errors.js";
import type { Task } from "../envs/env.js";
import { Semaphore } from "../rollout/semaphore.js";
import { pairedSolvedDifference, solvedRate, type HeldOutSample, type MeanSe } from "./held-out-stats.js";

/** One version's held-out score. */
export interface HeldOutScore {
  version: number;
  /** Solved rate (mean over tasks of each task's solved fraction) and its standard error over tasks. */
  solved: MeanSe;
  /** The version the difference is against (the first scored, version 0 in a run). */
  baseVersion: number;
  /** Paired difference of solved rates against `baseVersion` (absent for the base itself). */
  diff?: MeanSe;
  tasks: number;
  samples: number;
  temperature: number;
}

/**
 * Runs held-out sample `sample` of `tasks[taskIndex]` on the policy version the engines serve; resolves whether it
 * solved the task, or undefined when it ended without an outcome (aborted with the run).
 */
export type HeldOutRun = (task: Task, taskIndex: number, sample: number, version: number) => Promise<boolean | undefined>;

/** A version whose evaluation did not finish: `ended` of `total` programs have an outcome. It has no score. */
export interface HeldOutIncomplete {
  version: number;
  ended: number;
  total: number;
}

/**
 * What a resumed run's evaluation starts from (resume.json): the base version's samples, which every later
 * version's paired difference is taken against, and the scores so far.
 */
export interface HeldOutState {
  base: { version: number; samples: HeldOutSample[] };
  scores: HeldOutScore[];
}

export interface HeldOutEvaluationOptions {
  tasks: readonly Task[];
  samples: number;
  /** Score a version when it is a multiple of this (and always the first and the last). */
  every: number;
  /** Held-out programs running at once. */
  concurrency: number;
  temperature: number;
  run: HeldOutRun;
  /** A resumed run's state ({@link HeldOutEvaluation.state}): its base is not scored again, its scores are kept. */
  restore?: HeldOutState;
}

/** The held-out evaluation of one run; see the file header. */
export class HeldOutEvaluation {
  private readonly o: HeldOutEvaluationOptions;
  private readonly sem: Semaphore;
  private readonly byVersion = new Map<number, { samples: HeldOutSample[]; score: HeldOutScore }>();
  private base: { version: number; samples: HeldOutSample[] } | undefined;
  private readonly unfinished: HeldOutIncomplete[] = [];

  constructor(o: HeldOutEvaluationOptions) {
    if (o.tasks.length === 0) throw new ArborError("eval.tasks: need at least one held-out task", "config");
    if (!Number.isInteger(o.samples) || o.samples < 1) throw new ArborError(`eval.samples: must be an integer >= 1, got ${o.samples}`, "config");
    if (!Number.isInteger(o.every) || o.every < 1) throw new ArborError(`eval.every: must be an integer >= 1, got ${o.every}`, "config");
    this.o = o;
    this.sem = new Semaphore(o.concurrency);
    if (o.restore !== undefined) {
      this.base = o.restore.base;
      // Only the base's samples are read again (every difference is against it).
      for (const score of o.restore.scores) this.byVersion.set(score.version, { samples: score.version === o.restore.base.version ? o.restore.base.samples : [], score });
    }
  }

  /** What a resumed run needs to go on (undefined before the base version is scored). */
  state(): HeldOutState | undefined {
    return this.base === undefined ? undefined : { base: this.base, scores: this.scores };
  }

  /** The base version's score (the starting policy's in a run), once scored or restored. */
  get baseScore(): HeldOutScore | undefined {
    return this.base === undefined ? undefined : this.byVersion.get(this.base.version)?.score;
  }

  /** Every score so far, by version. */
  get scores(): HeldOutScore[] {
    return [...this.byVersion.values()].map((v) => v.score).sort((a, b) => a.version - b.version);
  }

  /** The versions whose evaluation did not finish (no score), in the order they were tried. */
  get incomplete(): HeldOutIncomplete[] {
    return [...this.unfinished];
  }

  /** Whether `version` is to be scored: the first, a multiple of `every`, or the run's last. */
  due(version: number, last: boolean): boolean {
    return this.base === undefined || last || version % this.o.every === 0;
  }

  /**
   * Score `version` (the engines must serve it until this resolves); a version scored before is not run again.
   * The first version scored is the base of every paired difference. Resolves undefined, recording the version
   * in {@link incomplete}, when any of its programs ended without an outcome.
   */
  async score(version: number): Promise<HeldOutScore | undefined> {
    const known = this.byVersion.get(version);
    if (known !== undefined) return known.score;
    const jobs = this.o.tasks.flatMap((task, taskIndex) =>
      Array.from({ length: this.o.samples }, (_, sample) => this.sem.with(async () => ({ taskId: task.id, sample, solved: await this.o.run(task, taskIndex, sample, version) }))),
    );
    const outcomes = await Promise.all(jobs);
    const samples = outcomes.filter((x): x is HeldOutSample => x.solved !== undefined);
    if (samples.length < outcomes.length) {
      this.unfinished.push({ version, ended: samples.length, total: outcomes.length });
      return undefined;
    }
    const base = this.base ?? { version, samples };
    this.base = base;
    const score: HeldOutScore = {
      version,
      solved: solvedRate(samples),
      baseVersion: base.version,
      ...(base.version !== version ? { diff: pairedSolvedDifference(base.samples, samples) } : {}),
      tasks: this.o.tasks.length,
      samples: this.o.samples,
      temperature: this.o.temperature,
    };
    this.byVersion.set(version, { samples, score });
    return score;
  }
}
