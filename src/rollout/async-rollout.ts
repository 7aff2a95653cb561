// The rollout half of the training loop (src/loop/train-loop.ts), sync and async alike, on the real stack:
// the RolloutOrchestrator admits groups (sync: one iteration of all its groups, the next only after the
// trainer's step; async: as the windowed FIFO and the staleness bound allow), the scheduling policy places
// their programs, and each program runs exactly as runProgram runs it (gateway key, sandbox, agent, env check)
// and is rewarded as it ends; it is then reported to the orchestrator with the versions of its tokens read
// from its recorded calls. The loop pulls batches (`next`), and around its weight sync calls `beginSync`
// (admission and reports pause) and `published` (every engine serves the version), or `skipped` when a step
// published nothing, so no token is ever reported ahead of the trainer. `finish` cuts the programs still
// running (their agents see the abort) and records admitted programs that never started as aborted, so every
// program ends with an outcome. The store run: one, `runId`, created at the first group (or reopened, when a
// run is resumed) and finished at the end; a sync run's groups each record their iteration (`iterationOf`).
import { setMaxListeners } from "node:events";
import type { Group, Trajectory } from "../core/types.js";
import type { Task } from "../envs/env.js";
import { ArborError } from "../core/errors.js";
import { untilAborted } from "../core/until-aborted.js";
import type { Rng } from "../core/rng.js";
import { callVersionSpans } from "./async-rollout-versions.js";
import type { OrchestratorSettings } from "./orchestrator/from-config.js";
import { RolloutOrchestrator, type RolloutBatch, type VersionSpan } from "./orchestrator/orchestrator.js";
import { createRolloutScheduler } from "./scheduling/registry.js";
import type { InstanceView, Placement, RolloutScheduler } from "./scheduling/types.js";
import { Semaphore } from "./semaphore.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { localPrograms, rewardProgram, type ProgramResult, type ProgramRunner, type ProgramRunOptions, type RolloutOptions } from "./sync-rollout.js";

/** An engine as the scheduling policy sees it. */
export interface RolloutEngine {
  name: string;
  /** Requests it runs at once (its sequences). */
  maxActive: number;
  /** Its KV capacity, tokens (sequences × context size). */
  kvCapacityTokens: number;
}

/** One batch the loop takes. */
export interface TakenBatch {
  /** The batch's id: `${run}-it${k}` (its iteration's key) when it is a sync iteration's whole set of groups, else `${run}-step${k}`. */
  id: string;
  /** The orchestrator's batch with store ids (groups, programs) and engine policy versions (`baseVersion` added back). */
  batch: RolloutBatch;
  groups: Group[];
  /** The batch's programs as stored (calls with their policyVersion, tools, reward). */
  trajectories: Trajectory[];
}

export interface OrchestratedRolloutOptions extends Omit<RolloutOptions, "groupSize" | "onProgramDone" | "sandboxes"> {
  /** Where programs run: in sandboxes of this process (`sandboxes`), or on workers (`programs`, `rollout/remote/`). */
  sandboxes?: SandboxProvider;
  programs?: ProgramRunner;
  /** Orchestrator settings (orchestratorSettings(cfg.rollout, tasks)). */
  settings: OrchestratorSettings;
  /** The scheduling policy (default fifo-group). It orders program starts; the gateway routes their calls. */
  scheduler?: RolloutScheduler;
  /** Shuffles the dataset. */
  rng: Rng;
  /** False: tasks run in the given order (sync runs: iteration k rolls out the k-th slice). Default true. */
  shuffle?: boolean;
  engines: readonly RolloutEngine[];
  /** The policy version the engines serve at the start (default 0). */
  baseVersion?: number;
  /**
   * False when the engines' versions are not this run's (backends it neither started nor syncs, so no
   * training): tokens are then counted at the orchestrator's version instead of their calls'. Default true.
   */
  trackVersions?: boolean;
  /**
   * The iteration of the group admitted at `position` and the key its group ids carry (`it3`; a resumed run's
   * interrupted iteration `it3-r1`, so its groups get fresh ids): `${runId}/${key}/g${i}`, and the resume rolling
   * it out (Group.attempt; absent: the run's first process). Absent: no iterations (async runs), group ids
   * `${runId}/g${i}`.
   */
  iterationOf?: (position: number) => { iteration: number; key: string; attempt?: number };
  /** Name and config of the store run this rollout creates. */
  run: { name: string; configJson: string };
  /** Resuming (`arbor run --resume`): the store run, finished, is reopened instead of created (created if it never was). */
  reopen?: boolean;
  /**
   * A resumed async run: the indices (into `tasks`) of the tasks its earlier processes trained on, left out of the
   * shuffled order (the rest keep theirs); `attempt` (its resumes so far, >= 1) keys its group ids
   * (`${runId}/r${attempt}/g${i}`, fresh beside the killed process's) and records on them (Group.attempt); its
   * batches are numbered after the `stepsBefore` steps done (`${runId}-step${k}`).
   */
  resumed?: { exclude: ReadonlySet<number>; attempt: number; stepsBefore: number };
  onProgramDone?: (p: ProgramResult) => void;
}

export type RolloutStopReason = "steps" | "drained" | "aborted";

export interface RolloutEnd {
  stoppedBy: RolloutStopReason;
  /** Every program admitted, in the order they ended. */
  results: ProgramResult[];
  /** Groups admitted whose programs never reached a batch (cut, or left when the run stopped). */
  unconsumedGroups: Group[];
  /** The policy version every engine serves at the end. */
  finalVersion: number;
  /** Output tokens counted at a newer version than their call's (see async-rollout-versions.ts). */
  invertedTokens: number;
  /** Recorded output tokens beyond a program's budget (agent.maxTotalTokens), not in any batch's count. */
  unreportedTokens: number;
}

interface ProgramState {
  task: Task;
  group: GroupState;
  programId: string;
  sampleIndex: number;
  /** Placed and started (or being started). */
  started: boolean;
  /** Ended and rewarded; spans still to report to the orchestrator, oldest first. */
  pending?: VersionSpan[];
  instance?: string;
}

interface GroupState {
  group: Group;
  /** The iteration key of its id (sync runs), else undefined. */
  key: string | undefined;
  /** Its task's index in `tasks`. */
  taskIndex: number;
  /** Resolves once the group (and its run) is in the store. */
  ready: Promise<void>;
  /**
   * Aborted when one of its programs has no outcome (its runner threw): a group reward then never comes, and its
   * siblings stop waiting for it.
   */
  broken: AbortController;
}

/** The orchestrator driven on the real stack; see the file header. */
export class OrchestratedRollout {
  private readonly o: OrchestratedRolloutOptions;
  private readonly orch: RolloutOrchestrator;
  private readonly base: number;
  private readonly maxTokens: number;
  /** Cuts the programs still running when the loop stops or the caller aborts. */
  private readonly cut = new AbortController();
  private readonly sem: Semaphore;
  private readonly runner: ProgramRunner;
  private readonly programs = new Map<string, ProgramState>();
  private readonly groups = new Map<string, GroupState>();
  private readonly consumed = new Set<string>();
  /** Indices (into `tasks`) of the tasks whose groups were taken into batches, in the order they were taken. */
  private readonly consumedTaskIndices: number[] = [];
  private readonly running = new Set<Promise<void>>();
  private readonly active: Map<string, number>;
  private readonly placed = new Map<string, Placement>();
  /** The store run, once its first group was admitted. */
  private run: { created: Promise<void>; finished: boolean } | undefined;
  /** First admission position of each iteration key: group numbers count from it. */
  private readonly keyStart = new Map<string, number>();
  private readonly results: ProgramResult[] = [];
  private deferred: string[] = [];
  private syncing = false;
  private ticking = false;
  private invertedTokens = 0;
  private unreportedTokens = 0;
  private stoppedBy: RolloutStopReason | undefined;
  private failure: unknown;
  /** The loop waits in next() for a batch. */
  private want: { resolve: (b: Promise<TakenBatch> | undefined) => void } | undefined;
  private changed: () => void = () => {};
  private readonly onAbort = (): void => this.halt("aborted");

  constructor(o: OrchestratedRolloutOptions) {
    if (o.engines.length === 0) throw new ArborError("rollout: engines must name at least one engine to place programs on", "config");
    this.o = o;
    this.base = o.baseVersion ?? 0;
    this.maxTokens = Math.max(o.limits.maxTotalTokens, 1);
    this.orch = new RolloutOrchestrator({
      ...o.settings,
      tasks: o.tasks.map((t, i) => ({ id: String(i), promptTokens: estimateTokens(t), maxTokens: this.maxTokens })),
      rng: o.rng,
      ...(o.shuffle === false ? { shuffle: false } : {}),
      ...(o.resumed ? { exclude: new Set([...o.resumed.exclude].map(String)) } : {}),
      scheduler: o.scheduler ?? createRolloutScheduler("fifo-group"),
      clock: o.clock,
      idPrefix: `${o.runId}/g`,
    });
    this.sem = new Semaphore(o.concurrency);
    // Every running program (at most `concurrency`, plus held-out ones) listens on the cut: no leak past 10.
    setMaxListeners(0, this.cut.signal);
    const programs = o.programs ?? (o.sandboxes ? localPrograms(o.sandboxes) : undefined);
    if (programs === undefined) throw new ArborError("rollout: needs sandboxes to run programs in, or a program runner (workers)", "config");
    this.runner = programs;
    this.active = new Map(o.engines.map((e) => [e.name, 0]));
    if (o.signal?.aborted) this.onAbort();
    else o.signal?.addEventListener("abort", this.onAbort, { once: true });
    this.tick();
  }

  /** Indices (into `tasks`) of the tasks whose groups batches took so far, in the order taken (an async run's resume state). */
  consumedTasks(): readonly number[] {
    return this.consumedTaskIndices;
  }

  /** True once the rollout stopped (aborted, failed, drained or finished): no more batches come. */
  get stopped(): boolean {
    return this.stoppedBy !== undefined;
  }

  /** The next batch once it is ready; undefined when the rollout stopped (dataset drained, abort or failure). */
  next(): Promise<TakenBatch | undefined> {
    if (this.want !== undefined) throw new ArborError("rollout: next() called while a batch is awaited", "internal");
    if (this.stoppedBy !== undefined) return Promise.resolve(undefined);
    return new Promise<TakenBatch | undefined>((resolve) => {
      this.want = { resolve: (b) => resolve(b) };
      this.tick();
    });
  }

  /**
   * The trainer published `version`: until {@link published}, no group is admitted and no program's end is
   * reported. False when the rollout has stopped (the engines keep their weights). Throws when `version` is not newer.
   */
  beginSync(version: number): boolean {
    if (this.stoppedBy !== undefined) return false;
    const next = version - this.base;
    if (!(Number.isInteger(next) && next > this.orch.version)) {
      throw new ArborError(`rollout: trainer published version ${version}, not newer than ${this.orch.version + this.base}`, "invalid_request");
    }
    this.syncing = true;
    return true;
  }

  /** Every engine serves `version` now: programs report against it and admission resumes. */
  published(version: number): void {
    this.syncing = false;
    if (this.stoppedBy !== undefined) return;
    this.orch.publishVersion(version - this.base);
    this.resume();
  }

  /** The trainer took the last batch and published nothing: rollout goes on at the same version. */
  skipped(): void {
    this.orch.skipVersion();
    this.resume();
  }

  /**
   * Stop (unless stopped already) and wait until every admitted program has a recorded outcome; finishes
   * the store runs. Throws the first failure of the rollout (or `err`, the loop's own failure).
   */
  async finish(why: RolloutStopReason, err?: unknown): Promise<RolloutEnd> {
    this.halt(why, err);
    for (;;) {
      if (this.running.size === 0) {
        // Admitted programs never placed still get their outcome (aborted before start).
        const unstarted = [...this.programs].filter(([, st]) => !st.started);
        if (unstarted.length === 0) break;
        for (const [id, st] of unstarted) this.start(id, st);
      }
      await new Promise<void>((resolve) => (this.changed = resolve));
    }
    this.o.signal?.removeEventListener("abort", this.onAbort);
    await this.finishRun();
    if (this.failure !== undefined) throw this.failure;
    return {
      stoppedBy: this.stoppedBy ?? why,
      results: this.results,
      unconsumedGroups: [...this.groups.values()].filter((g) => !this.consumed.has(g.group.id)).map((g) => g.group),
      finalVersion: this.orch.version + this.base,
      invertedTokens: this.invertedTokens,
      unreportedTokens: this.unreportedTokens,
    };
  }

  private halt(why: RolloutStopReason, err?: unknown): void {
    if (this.stoppedBy === undefined) this.stoppedBy = why;
    if (err !== undefined && this.failure === undefined) this.failure = err;
    if (!this.cut.signal.aborted) this.cut.abort(why === "aborted" && err === undefined ? this.o.signal?.reason : (err ?? new Error(`rollout stopped (${why})`)));
    this.want?.resolve(undefined);
    this.want = undefined;
    this.changed();
  }

  private resume(): void {
    const later = this.deferred;
    this.deferred = [];
    for (const id of later) this.report(id);
    this.tick();
  }

  private optionsOf(runId: string): Omit<ProgramRunOptions, "sandboxes"> & Pick<RolloutOptions, "reward"> {
    return { ...this.o, runId, signal: this.cut.signal };
  }

  private start(id: string, st: ProgramState): void {
    st.started = true;
    const ro = this.optionsOf(st.group.group.runId);
    const { group, broken } = st.group;
    const job = st.group.ready
      .then(() => this.sem.with(() => this.runner.run(ro, st.task, group, st.programId, st.sampleIndex)))
      .catch((e: unknown) => {
        broken.abort(new ArborError(`program ${st.programId} of group ${group.id} has no outcome, so its group has no reward: ${e instanceof Error ? e.message : String(e)}`, "rollout_failed"));
        throw e;
      })
      .then(async (ended) => {
        const r = await untilAborted(rewardProgram(ro, group, ended), broken.signal);
        this.results.push(r);
        this.o.onProgramDone?.(r);
        const { spans, inverted } = callVersionSpans(ended.ctx.trajectory.calls, this.base);
        this.invertedTokens += inverted;
        const tokens = spans.reduce((n, x) => n + x.tokens, 0);
        st.pending = this.o.trackVersions === false ? (tokens > 0 ? [{ version: this.orch.version, tokens }] : []) : spans;
        if (this.syncing) this.deferred.push(id);
        else this.report(id);
      })
      .catch((e: unknown) => this.halt("aborted", e))
      .finally(() => {
        this.running.delete(job);
        this.tick();
        this.changed();
      });
    this.running.add(job);
  }

  /** Report an ended program's next span (or its end) against its current placement. */
  private report(id: string): void {
    if (this.stoppedBy !== undefined) return;
    const st = this.programs.get(id) as ProgramState;
    const spans = st.pending as VersionSpan[];
    const p = this.placed.get(id);
    if (p === undefined) return; // re-placed later by tick()
    this.placed.delete(id);
    if (st.instance !== undefined) this.active.set(st.instance, (this.active.get(st.instance) ?? 1) - 1);
    const head = spans[0];
    const n = head === undefined ? 0 : Math.min(head.tokens, p.maxTokens);
    if (head !== undefined) {
      head.tokens -= n;
      if (head.tokens === 0) spans.shift();
    }
    if (p.generated + n >= this.maxTokens) {
      // The orchestrator ends a request at its budget: output beyond it cannot be reported, only counted.
      this.unreportedTokens += spans.reduce((a, x) => a + x.tokens, 0);
      spans.length = 0;
    }
    this.orch.onChunkEnd(id, n, head?.version ?? this.orch.version, spans.length === 0);
    this.tick();
  }

  /** Admit, place, report and hand over a batch as far as the state allows now. */
  private tick(): void {
    if (this.ticking || this.stoppedBy !== undefined) return;
    this.ticking = true;
    try {
      for (let progress = true; progress && this.stoppedBy === undefined; ) {
        progress = false;
        if (!this.syncing) for (const g of this.orch.pump()) this.admit(g.id, Number(g.taskId), g.requests);
        for (const p of this.syncing ? [] : this.orch.next(this.views())) {
          const st = this.programs.get(p.requestId) as ProgramState;
          this.placed.set(p.requestId, p);
          st.instance = p.instance;
          this.active.set(p.instance, (this.active.get(p.instance) ?? 0) + 1);
          if (!st.started) this.start(p.requestId, st);
          else if (st.pending !== undefined) {
            this.report(p.requestId);
            progress = true;
          }
        }
      }
      if (this.want !== undefined && !this.syncing) {
        const batch = this.orch.takeBatch();
        if (batch !== undefined) {
          this.want.resolve(this.take(batch));
          this.want = undefined;
        } else if (this.orch.done()) this.halt("drained");
        // Nothing runs and nothing can start: a scheduling policy that never places what is left.
        else if (this.running.size === 0) this.halt("aborted", new ArborError(`rollout stalled: ${JSON.stringify(this.orch.stats())}`, "internal"));
      }
    } catch (e) {
      this.halt("aborted", e);
    } finally {
      this.ticking = false;
    }
  }

  /**
   * Resolves once the run's store run exists: created (or reopened, resuming) at the first call, here or at the
   * first admitted group. Held-out evaluation (loop/held-out-programs.ts) writes its groups into the same run, and
   * may do so before the first group; the rollout still finishes the run in {@link finish}.
   */
  runReady(): Promise<void> {
    this.run ??= { created: this.openRun(), finished: false };
    return this.run.created;
  }

  /** Create the store run, or reopen it when resuming (a killed predecessor may not have got as far as creating it). */
  private async openRun(): Promise<void> {
    const { store, runId } = this.o;
    if (this.o.reopen && (await store.getRun(runId)) !== undefined) return store.reopenRun(runId);
    return store.createRun({ id: runId, name: this.o.run.name, configJson: this.o.run.configJson, startedAt: this.o.clock.now() });
  }

  private admit(orchId: string, taskIndex: number, requests: readonly { id: string; index: number }[]): void {
    const position = this.groups.size;
    const runId = this.o.runId;
    const created = this.runReady();
    const it = this.o.iterationOf?.(position);
    if (it !== undefined && !this.keyStart.has(it.key)) this.keyStart.set(it.key, position);
    const task = this.o.tasks[taskIndex] as Task;
    const resumed = this.o.resumed;
    const id =
      it !== undefined ? `${runId}/${it.key}/g${position - (this.keyStart.get(it.key) as number)}` : resumed !== undefined ? `${runId}/r${resumed.attempt}/g${position}` : `${runId}/g${position}`;
    const attempt = it?.attempt ?? resumed?.attempt;
    const group: Group = { id, runId, taskId: task.id, programIds: requests.map((r) => `${id}/s${r.index}`), ...(it !== undefined ? { iteration: it.iteration } : {}), ...(attempt !== undefined ? { attempt } : {}) };
    const ready = (async () => {
      await created;
      await this.o.store.createGroup(group);
    })();
    // A failed store write stops the rollout; the programs waiting on it end as failed jobs.
    ready.catch((e: unknown) => this.halt("aborted", e));
    const gs: GroupState = { group, key: it?.key, taskIndex, ready, broken: new AbortController() };
    this.groups.set(orchId, gs);
    requests.forEach((r, i) => this.programs.set(r.id, { task, group: gs, programId: group.programIds[i] as string, sampleIndex: r.index, started: false }));
  }

  private views(): InstanceView[] {
    return this.o.engines.map((e) => ({ name: e.name, kvCapacityTokens: e.kvCapacityTokens, usedKvTokens: 0, active: this.active.get(e.name) ?? 0, maxActive: e.maxActive }));
  }

  /** The batch with store ids and engine versions, its programs read back from the store. */
  private async take(batch: RolloutBatch): Promise<TakenBatch> {
    const gs = batch.groups.map((g) => this.groups.get(g.id) as GroupState);
    for (const g of gs) {
      this.consumed.add(g.group.id);
      this.consumedTaskIndices.push(g.taskIndex);
    }
    const programId = (requestId: string): string => (this.programs.get(requestId) as ProgramState).programId;
    const abs: RolloutBatch = {
      ...batch,
      version: batch.version + this.base,
      groups: batch.groups.map((g, i) => ({
        ...g,
        id: (gs[i] as GroupState).group.id,
        admittedAt: g.admittedAt + this.base,
        trajectories: g.trajectories.map((t) => ({ ...t, requestId: programId(t.requestId), versions: t.versions.map((s) => ({ version: s.version + this.base, tokens: s.tokens })) })),
      })),
    };
    const groups = gs.map((g) => g.group);
    const trajectories = await Promise.all(groups.flatMap((g) => g.programIds.map(async (id) => (await this.o.store.getTrajectory(id)) as Trajectory)));
    // A sync iteration taken whole (every group of its key, and only those) is named after it.
    const keys = new Set(gs.map((g) => g.key));
    const [key] = keys;
    const whole = this.o.settings.mode === "sync" && keys.size === 1 && key !== undefined && [...this.groups.values()].every((g) => g.key !== key || gs.includes(g));
    return { id: whole ? `${this.o.runId}-${key}` : `${this.o.runId}-step${(this.o.resumed?.stepsBefore ?? 0) + batch.index + 1}`, batch: abs, groups, trajectories };
  }

  private async finishRun(): Promise<void> {
    const run = this.run;
    if (run === undefined || run.finished) return;
    run.finished = true;
    await run.created;
    await this.o.store.finishRun(this.o.runId, this.o.clock.now());
  }
}

/** Prompt tokens of a task, estimated from its text (the scheduler's KV view; programs grow past it). */
function estimateTokens(t: Task): number {
  return Math.max(1, Math.ceil(t.prompt.reduce((n, m) => n + m.content.length, 0) / 4));
}
