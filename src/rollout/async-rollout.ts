// Asynchronous rollout on the real stack: the RolloutOrchestrator in async mode drives programs that
// run exactly as in the synchronous rollout (gateway key, sandbox, agent, env check, reward). Groups
// are admitted as the windowed FIFO and the staleness bound allow; a program is started when the
// scheduling policy places its request and reported to the orchestrator once it has ended and been
// rewarded, with the versions of its tokens read from its recorded calls. A caller-given trainer
// takes batches as they become ready and returns a new policy; the driver then loads it on every
// engine (POST /v1/load_weights) and only after that tells the orchestrator the new version, so no
// token is ever reported ahead of the trainer. While engines reload, admission pauses and program
// reports wait. The loop stops after `maxTrainerSteps` steps, when the dataset is drained, or on
// abort; programs still running are cut (their agents see the abort) and admitted programs that
// never started are recorded as aborted, so every program ends with an outcome.
import type { Group, Trajectory } from "../core/types.js";
import type { Task } from "../envs/env.js";
import { ArborError } from "../core/errors.js";
import type { Rng } from "../core/rng.js";
import { loadWeightsEverywhere, type InFlightOnSwitch, type SyncedEngine } from "./async-rollout-weights.js";
import { callVersionSpans } from "./async-rollout-versions.js";
import type { OrchestratorSettings } from "./orchestrator/from-config.js";
import { RolloutOrchestrator, type RolloutBatch, type VersionSpan } from "./orchestrator/orchestrator.js";
import { createRolloutScheduler } from "./scheduling/registry.js";
import type { InstanceView, Placement, RolloutScheduler } from "./scheduling/types.js";
import { Semaphore } from "./semaphore.js";
import { rewardProgram, runProgram, type ProgramResult, type RolloutOptions } from "./sync-rollout.js";

/** An engine of the run: synced on every new policy, and an instance the scheduling policy sees. */
export interface AsyncEngine extends SyncedEngine {
  /** Requests it runs at once (its sequences). */
  maxActive: number;
  /** Its KV capacity, tokens (sequences × context size). */
  kvCapacityTokens: number;
}

/** A policy the trainer published: a GGUF every engine can load, and its version. */
export interface PublishedPolicy {
  modelPath: string;
  version: number;
}

/** What the trainer gets in one step. */
export interface AsyncTrainerBatch {
  /** The orchestrator's batch; versions are engine policy versions (`baseVersion` added back). */
  batch: RolloutBatch;
  groups: Group[];
  /** The batch's programs as stored (calls with their policyVersion, tools, reward). */
  trajectories: Trajectory[];
}

export interface AsyncRolloutOptions extends Omit<RolloutOptions, "groupSize" | "onProgramDone"> {
  /** Orchestrator settings (orchestratorSettings(cfg.rollout, tasks)); `mode` must be "async". */
  settings: OrchestratorSettings;
  /** The scheduling policy (default fifo-group). It orders program starts; the gateway routes their calls. */
  scheduler?: RolloutScheduler;
  /** Shuffles the dataset. */
  rng: Rng;
  engines: readonly AsyncEngine[];
  /** The engines' `in_flight` on a weight switch, unless an engine names its own. */
  inFlight: InFlightOnSwitch;
  /** The policy version the engines serve at the start (default 0). */
  baseVersion?: number;
  /**
   * Trains on a batch and publishes the new policy (its version must be newer than the last), or
   * null when the batch gave nothing to learn from (e.g. every advantage 0): the step counts, the
   * batch is consumed, and the engines keep their weights.
   */
  trainer: (b: AsyncTrainerBatch) => Promise<PublishedPolicy | null>;
  /** Trainer steps after which the rollout stops (programs still running are cut). */
  maxTrainerSteps: number;
  onProgramDone?: (p: ProgramResult) => void;
  /** Called after each weight sync, once every engine serves `version`. */
  onWeightSync?: (version: number) => void;
}

export type AsyncStopReason = "steps" | "drained" | "aborted";

export interface AsyncRolloutResult {
  stoppedBy: AsyncStopReason;
  /** Batches the trainer took, in order. */
  batches: AsyncTrainerBatch[];
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
  group: Group;
  sampleIndex: number;
  /** Placed and started (or being started). */
  started: boolean;
  /** Ended and rewarded; spans still to report to the orchestrator, oldest first. */
  pending?: VersionSpan[];
  instance?: string;
}

/** Run the asynchronous rollout; resolves when every admitted program has a recorded outcome. */
export async function runAsyncRollout(o: AsyncRolloutOptions): Promise<AsyncRolloutResult> {
  if (o.settings.mode !== "async") throw new ArborError(`async rollout: settings.mode must be "async", got ${String(o.settings.mode)}`, "config");
  if (!(Number.isInteger(o.maxTrainerSteps) && o.maxTrainerSteps >= 1)) {
    throw new ArborError(`async rollout: maxTrainerSteps must be an integer >= 1, got ${o.maxTrainerSteps}`, "config");
  }
  if (o.engines.length === 0) throw new ArborError("async rollout: engines must name at least one engine to sync", "config");
  const base = o.baseVersion ?? 0;
  const maxTokens = Math.max(o.limits.maxTotalTokens, 1);
  const orch = new RolloutOrchestrator({
    ...o.settings,
    tasks: o.tasks.map((t, i) => ({ id: String(i), promptTokens: estimateTokens(t), maxTokens })),
    rng: o.rng,
    scheduler: o.scheduler ?? createRolloutScheduler("fifo-group"),
    clock: o.clock,
    idPrefix: `${o.runId}/g`,
  });

  // Cuts the programs still running when the loop stops (steps done, failure) or the caller aborts.
  const cut = new AbortController();
  const ro: RolloutOptions = { ...o, groupSize: o.settings.groupSize, signal: cut.signal };

  const sem = new Semaphore(o.concurrency);
  const programs = new Map<string, ProgramState>();
  const groups = new Map<string, Group>();
  const consumed = new Set<string>();
  const running = new Set<Promise<void>>();
  const active = new Map<string, number>(o.engines.map((e) => [e.name, 0]));
  const results: ProgramResult[] = [];
  const batches: AsyncTrainerBatch[] = [];
  let deferred: string[] = [];
  let syncing = false;
  let training = false;
  let steps = 0;
  let invertedTokens = 0;
  let unreportedTokens = 0;
  let stopped: AsyncStopReason | undefined;
  let failure: unknown;
  let wake: () => void = () => {};

  const views = (): InstanceView[] =>
    o.engines.map((e) => ({ name: e.name, kvCapacityTokens: e.kvCapacityTokens, usedKvTokens: 0, active: active.get(e.name) ?? 0, maxActive: e.maxActive }));

  const stop = (why: AsyncStopReason, err?: unknown): void => {
    if (stopped === undefined) stopped = why;
    if (err !== undefined && failure === undefined) failure = err;
    if (!cut.signal.aborted) cut.abort(why === "aborted" && err === undefined ? o.signal?.reason : (err ?? new Error(`async rollout stopped (${why})`)));
    wake();
  };
  const onAbort = (): void => stop("aborted");
  if (o.signal?.aborted) onAbort();
  else o.signal?.addEventListener("abort", onAbort, { once: true });
  const placed = new Map<string, Placement>();
  /** Each group's write to the store, which its programs wait for. */
  const groupsCreated = new Map<string, Promise<void>>();

  const startProgram = (requestId: string, st: ProgramState): void => {
    st.started = true;
    const job = sem
      .with(async () => {
        await groupsCreated.get(st.group.id);
        return runProgram(ro, st.task, st.group, requestId, st.sampleIndex);
      })
      .then(async (ended) => {
        const r = await rewardProgram(ro, st.group, ended);
        results.push(r);
        o.onProgramDone?.(r);
        const { spans, inverted } = callVersionSpans(ended.ctx.trajectory.calls, base);
        invertedTokens += inverted;
        st.pending = spans;
        if (syncing) deferred.push(requestId);
        else report(requestId);
      })
      .catch((e: unknown) => stop("aborted", e))
      .finally(() => {
        running.delete(job);
        wake();
      });
    running.add(job);
  };

  /** Report an ended program's next span (or its end) against its current placement. */
  const report = (requestId: string): void => {
    if (stopped !== undefined) return;
    const st = programs.get(requestId) as ProgramState;
    const spans = st.pending as VersionSpan[];
    const p = placed.get(requestId);
    if (p === undefined) return; // re-placed later by tick()
    placed.delete(requestId);
    if (st.instance !== undefined) active.set(st.instance, (active.get(st.instance) ?? 1) - 1);
    const head = spans[0];
    const n = head === undefined ? 0 : Math.min(head.tokens, p.maxTokens);
    if (head !== undefined) {
      head.tokens -= n;
      if (head.tokens === 0) spans.shift();
    }
    if (p.generated + n >= maxTokens) {
      // The orchestrator ends a request at its budget: output beyond it cannot be reported, only counted.
      unreportedTokens += spans.reduce((a, x) => a + x.tokens, 0);
      spans.length = 0;
    }
    orch.onChunkEnd(requestId, n, head?.version ?? orch.version, spans.length === 0);
    tick();
  };

  let ticking = false;
  /** Admit, place, report and train as far as the state allows now. */
  const tick = (): void => {
    if (ticking || stopped !== undefined) return;
    ticking = true;
    try {
      for (let progress = true; progress && stopped === undefined; ) {
        progress = false;
        if (!syncing) {
          for (const g of orch.pump()) {
            const task = o.tasks[Number(g.taskId)] as Task;
            const group: Group = { id: g.id, runId: o.runId, taskId: task.id, programIds: g.requests.map((r) => r.id) };
            const created = o.store.createGroup(group);
            // A group the store refused stops the rollout; its programs wait for it (startProgram).
            created.catch((e: unknown) => stop("aborted", e));
            groupsCreated.set(g.id, created);
            groups.set(g.id, group);
            for (const r of g.requests) programs.set(r.id, { task, group, sampleIndex: r.index, started: false });
          }
        }
        for (const p of syncing ? [] : orch.next(views())) {
          const st = programs.get(p.requestId) as ProgramState;
          placed.set(p.requestId, p);
          st.instance = p.instance;
          active.set(p.instance, (active.get(p.instance) ?? 0) + 1);
          if (!st.started) startProgram(p.requestId, st);
          else if (st.pending !== undefined) {
            report(p.requestId);
            progress = true;
          }
        }
        progress = train() || progress;
      }
      if (stopped === undefined && orch.done() && !training) stop("drained");
    } catch (e) {
      stop("aborted", e);
    } finally {
      ticking = false;
    }
  };

  const train = (): boolean => {
    if (training || syncing || steps >= o.maxTrainerSteps) return false;
    const batch = orch.takeBatch();
    if (batch === undefined) return false;
    training = true;
    for (const g of batch.groups) consumed.add(g.id);
    void (async () => {
      const taken = await toTrainerBatch(batch);
      batches.push(taken);
      const policy = await o.trainer(taken);
      // Stopped while training (abort, failure): the engines keep serving the old weights.
      if (stopped !== undefined) {
        training = false;
        return wake();
      }
      if (policy !== null) {
        const next = policy.version - base;
        if (!(Number.isInteger(next) && next > orch.version)) {
          throw new ArborError(`async rollout: trainer published version ${policy.version}, not newer than ${orch.version + base}`, "invalid_request");
        }
        syncing = true;
        await loadWeightsEverywhere(o.engines, policy.modelPath, policy.version, o.inFlight);
        orch.publishVersion(next);
        syncing = false;
        o.onWeightSync?.(policy.version);
      }
      steps++;
      const later = deferred;
      deferred = [];
      training = false;
      if (steps >= o.maxTrainerSteps) return stop("steps");
      for (const id of later) report(id);
      tick();
    })().catch((e: unknown) => {
      training = false;
      syncing = false;
      stop("aborted", e);
    });
    return true;
  };

  const toTrainerBatch = async (batch: RolloutBatch): Promise<AsyncTrainerBatch> => {
    const abs: RolloutBatch = {
      ...batch,
      version: batch.version + base,
      groups: batch.groups.map((g) => ({
        ...g,
        admittedAt: g.admittedAt + base,
        trajectories: g.trajectories.map((t) => ({ ...t, versions: t.versions.map((s) => ({ version: s.version + base, tokens: s.tokens })) })),
      })),
    };
    const gs = batch.groups.map((g) => groups.get(g.id) as Group);
    const trajectories = (await Promise.all(gs.flatMap((g) => g.programIds.map((id) => o.store.getTrajectory(id))))) as Trajectory[];
    return { batch: abs, groups: gs, trajectories };
  };

  const idle = (): boolean => running.size === 0 && !training;
  try {
    tick();
    // Until the loop has stopped and every admitted program has ended.
    for (;;) {
      if (stopped === undefined && idle()) {
        tick();
        // Nothing runs and nothing can start: a scheduling policy that never places what is left.
        if (stopped === undefined && idle()) stop("aborted", new ArborError(`async rollout stalled: ${JSON.stringify(orch.stats())}`, "internal"));
      }
      if (stopped !== undefined && idle()) {
        // Admitted programs never placed still get their outcome (aborted before start).
        const unstarted = [...programs].filter(([, st]) => !st.started);
        if (unstarted.length === 0) break;
        for (const [id, st] of unstarted) startProgram(id, st);
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    o.signal?.removeEventListener("abort", onAbort);
  }
  if (failure !== undefined) throw failure;
  return {
    stoppedBy: stopped ?? "aborted",
    batches,
    results,
    unconsumedGroups: [...groups.values()].filter((g) => !consumed.has(g.id)),
    finalVersion: orch.version + base,
    invertedTokens,
    unreportedTokens,
  };
}

/** Prompt tokens of a task, estimated from its text (the scheduler's KV view; programs grow past it). */
function estimateTokens(t: Task): number {
  return Math.max(1, Math.ceil(t.prompt.reduce((n, m) => n + m.content.length, 0) / 4));
}
