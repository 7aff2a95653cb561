// The rollout orchestrator's core, as an I/O-free state machine: dataset → groups of n samples,
// admission by mode, per-token policy versions, and the batches the trainer gets.
// - sync: an iteration admits B groups at once; its batch is ready when all of them finish, and the
//   next iteration starts only after the trainer publishes the new weights (staleness 0).
// - async: rollout never stops; groups are admitted while the windowed FIFO (Forge, §B3) has fewer
//   than N unconsumed groups and AReaL's staleness bound (§B4) allows; the trainer takes completed
//   groups from the window. On a weight sync the driver may interrupt chunks in flight: their tokens
//   keep the version that made them and the request continues later at the new one (partial
//   rollout), so a trajectory can span versions — each records the version of every token.
// Which request runs where is the scheduling policy's (scheduling/), which the driver runs on
// engines (the simulator, or the gateway in a real run) and reports back through onChunkEnd.
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import type { Rng } from "../../core/rng.js";
import type { InstanceView, Placement, RolloutGroupSpec, RolloutScheduler } from "../scheduling/types.js";
import { stalenessCapacity } from "./staleness.js";
import { WindowedFifo } from "./windowed-fifo.js";

export type RolloutMode = "sync" | "async";

/** One task of the dataset: a prompt sampled n times per group. */
export interface OrchestratorTask {
  id: string;
  promptTokens: number;
  maxTokens: number;
  /** True output length of each sample (simulation only; read by evaluation policies). */
  oracleLengths?: readonly number[];
}

/** A run of consecutive tokens produced by one policy version. */
export interface VersionSpan {
  version: number;
  tokens: number;
}

/** A group the orchestrator admitted: the scheduler's view plus its task. */
export interface AdmittedGroup extends RolloutGroupSpec {
  taskId: string;
}

/** One sample's output as the trainer gets it. */
export interface TrajectoryRecord {
  requestId: string;
  index: number;
  tokens: number;
  /** Policy version of every token, run-length encoded in token order (Σ tokens = `tokens`). */
  versions: VersionSpan[];
}

/** One group in a batch. */
export interface BatchGroup {
  id: string;
  taskId: string;
  /** Position in generation (admission) order. */
  position: number;
  /** Trainer version when the group was admitted. */
  admittedAt: number;
  trajectories: TrajectoryRecord[];
}

/** What the trainer takes in one step. */
export interface RolloutBatch {
  index: number;
  /** Trainer version when the batch was taken (the weights it will update). */
  version: number;
  groups: BatchGroup[];
  tokens: number;
  /** Mean and max over tokens of (batch version − token version). */
  meanStaleness: number;
  maxStaleness: number;
}

export interface OrchestratorOptions {
  mode: RolloutMode;
  /** Samples per task (n). */
  groupSize: number;
  /** Groups per training batch (B). */
  batchGroups: number;
  tasks: readonly OrchestratorTask[];
  /** Passes over the dataset (default 1); each pass is shuffled with `rng`. */
  epochs?: number;
  /** False: each pass takes the tasks in the given order (a run whose iteration k is the k-th slice). Default true. */
  shuffle?: boolean;
  rng: Rng;
  scheduler: RolloutScheduler;
  clock: Clock;
  /** Async: unconsumed groups at most (N, the FIFO's length). Default 2·B. */
  maxInFlightGroups?: number;
  /** Async: window W, groups. Default N. */
  window?: number;
  /** Async: η, max versions a sample may run ahead of the trainer. Default unbounded. */
  maxStaleness?: number;
  /** Prefix of group ids (default "g"). */
  idPrefix?: string;
  /**
   * Ids of tasks left out of every pass, after its shuffle (a resumed async run's tasks already trained on): the
   * other tasks keep the order they had, so the resumed run admits what the killed one would have.
   */
  exclude?: ReadonlySet<string>;
  /** Called by publishVersion: engines reload the weights (and may interrupt chunks in flight). */
  onWeightSync?: (version: number) => void;
}

interface TrajState {
  rec: TrajectoryRecord;
  maxTokens: number;
  group: GroupState;
}

interface GroupState {
  batch: BatchGroup;
  open: number;
}

/** Counters for reports and invariant checks. */
export interface OrchestratorStats {
  admitted: number;
  running: number;
  accepted: number;
  consumed: number;
  chunksInFlight: number;
}

/** The orchestrator; see the file header. */
export class RolloutOrchestrator {
  private readonly o: OrchestratorOptions;
  private readonly order: OrchestratorTask[] = [];
  private nextTask = 0;
  private readonly trajs = new Map<string, TrajState>();
  private readonly inFlight = new Map<string, Placement>();
  private readonly fifo: WindowedFifo<BatchGroup> | undefined;
  private readonly maxInFlight: number;
  private readonly maxStaleness: number;
  private current = 0;
  private admitted = 0;
  private accepted = 0;
  private consumed = 0;
  private batches = 0;
  /** Sync: batches the trainer consumed without publishing a version (no signal). */
  private skipped = 0;
  /** Sync: the iteration running, in admission order. */
  private iteration: GroupState[] | undefined;
  /** Async: groups taken from the window for the batch being filled. */
  private pending: BatchGroup[] = [];

  constructor(o: OrchestratorOptions) {
    const posInt = (field: string, v: unknown): void => {
      if (!(typeof v === "number" && Number.isInteger(v) && v >= 1)) throw new ArborError(`orchestrator: ${field} must be an integer >= 1, got ${String(v)}`, "config");
    };
    if (o.mode !== "sync" && o.mode !== "async") throw new ArborError(`orchestrator: mode must be "sync" or "async", got ${String(o.mode)}`, "config");
    posInt("groupSize", o.groupSize);
    posInt("batchGroups", o.batchGroups);
    posInt("epochs", o.epochs ?? 1);
    this.o = o;
    this.maxInFlight = o.maxInFlightGroups ?? 2 * o.batchGroups;
    posInt("maxInFlightGroups", this.maxInFlight);
    this.maxStaleness = o.maxStaleness ?? Infinity;
    if (!(this.maxStaleness >= 0)) throw new ArborError(`orchestrator: maxStaleness must be >= 0, got ${this.maxStaleness}`, "config");
    if (o.mode === "async") {
      const w = o.window ?? this.maxInFlight;
      posInt("window", w);
      this.fifo = new WindowedFifo<BatchGroup>(Math.min(w, this.maxInFlight), this.maxInFlight);
    }
    for (const t of o.tasks) {
      if (t.oracleLengths !== undefined && t.oracleLengths.length !== o.groupSize) {
        throw new ArborError(`orchestrator: task ${t.id} has ${t.oracleLengths.length} oracleLengths for groupSize ${o.groupSize}`, "config");
      }
    }
    for (let e = 0; e < (o.epochs ?? 1); e++) {
      const idx = o.tasks.map((_, i) => i);
      if (o.shuffle !== false) o.rng.fork(`epoch:${e}`).shuffle(idx);
      for (const i of idx) {
        const task = o.tasks[i] as OrchestratorTask;
        if (!o.exclude?.has(task.id)) this.order.push(task);
      }
    }
  }

  /** The trainer's current policy version. */
  get version(): number {
    return this.current;
  }

  /** Admit the groups the mode allows now (they are handed to the scheduler); returns them. */
  pump(): AdmittedGroup[] {
    const out: AdmittedGroup[] = [];
    if (this.o.mode === "sync") {
      if (this.iteration !== undefined || this.current + this.skipped < this.batches || this.nextTask >= this.order.length) return out;
      const it: GroupState[] = [];
      try {
        for (let i = 0; i < this.o.batchGroups && this.nextTask < this.order.length; i++) {
          const [spec, g] = this.admit();
          it.push(g);
          out.push(spec);
        }
      } finally {
        // Groups admitted before a refusal still form the iteration: nothing admitted is dropped.
        if (it.length > 0) this.iteration = it;
      }
      return out;
    }
    const fifo = this.fifo as WindowedFifo<BatchGroup>;
    while (this.nextTask < this.order.length && fifo.size < this.maxInFlight) {
      const cap = stalenessCapacity({
        maxConcurrent: this.maxInFlight,
        running: this.admitted - this.accepted,
        accepted: this.accepted,
        version: this.current,
        batchSize: this.o.batchGroups,
        maxStaleness: this.maxStaleness,
      });
      if (cap < 1) break;
      const [spec, g] = this.admit();
      fifo.push(g.batch.id);
      out.push(spec);
    }
    return out;
  }

  /** Ask the scheduling policy for placements; the driver must run each and report its end. */
  next(instances: readonly InstanceView[]): Placement[] {
    const out = this.o.scheduler.next(instances, this.o.clock.now());
    for (const p of out) {
      if (!this.trajs.has(p.requestId)) throw new ArborError(`orchestrator: scheduler placed unknown request ${p.requestId}`, "internal");
      if (this.inFlight.has(p.requestId)) throw new ArborError(`orchestrator: scheduler placed ${p.requestId} twice`, "internal");
      this.inFlight.set(p.requestId, p);
    }
    return out;
  }

  /**
   * A placed chunk ended with `tokens` new tokens made by policy `version`. `finished` = the
   * request completed (stop token); otherwise it continues later (chunk budget spent, or
   * interrupted). Throws when the report contradicts the placement.
   */
  onChunkEnd(requestId: string, tokens: number, version: number, finished: boolean): void {
    const p = this.inFlight.get(requestId);
    if (p === undefined) throw new ArborError(`orchestrator: chunk end for ${requestId}, which has no chunk in flight`, "invalid_request");
    const t = this.trajs.get(requestId) as TrajState;
    if (!Number.isInteger(tokens) || tokens < 0 || tokens > p.maxTokens) {
      throw new ArborError(`orchestrator: ${requestId}: chunk of ${p.maxTokens} tokens reported ${tokens}`, "invalid_request");
    }
    const spans = t.rec.versions;
    const last = spans[spans.length - 1];
    if (tokens > 0 && (!Number.isInteger(version) || version < (last?.version ?? 0) || version > this.current)) {
      throw new ArborError(
        `orchestrator: ${requestId}: tokens of version ${version} after version ${last?.version ?? 0} (trainer at ${this.current})`,
        "invalid_request",
      );
    }
    this.inFlight.delete(requestId);
    if (tokens > 0) {
      if (last !== undefined && last.version === version) last.tokens += tokens;
      else spans.push({ version, tokens });
      t.rec.tokens += tokens;
    }
    this.o.scheduler.onChunkEnd(requestId, tokens, finished, this.o.clock.now());
    if (!(finished || t.rec.tokens === t.maxTokens)) return;
    this.trajs.delete(requestId);
    const g = t.group;
    if (--g.open > 0) return;
    this.accepted++;
    this.fifo?.complete(g.batch.id, g.batch);
  }

  /** The next training batch, or undefined when none is ready (see the file header). */
  takeBatch(): RolloutBatch | undefined {
    let groups: BatchGroup[];
    if (this.o.mode === "sync") {
      const it = this.iteration;
      if (it === undefined || it.some((g) => g.open > 0)) return undefined;
      this.iteration = undefined;
      groups = it.map((g) => g.batch);
    } else {
      const fifo = this.fifo as WindowedFifo<BatchGroup>;
      for (const t of fifo.take(this.o.batchGroups - this.pending.length)) this.pending.push(t.value);
      const drained = this.nextTask >= this.order.length && fifo.size === 0;
      if (this.pending.length < this.o.batchGroups && !(drained && this.pending.length > 0)) return undefined;
      groups = this.pending;
      this.pending = [];
    }
    this.consumed += groups.length;
    return this.makeBatch(groups);
  }

  /** The trainer published new weights: move to `version` and run the weight-sync hook. */
  publishVersion(version: number): void {
    if (!Number.isInteger(version) || version <= this.current) {
      throw new ArborError(`orchestrator: publishVersion(${version}): versions must increase (current ${this.current})`, "invalid_request");
    }
    this.current = version;
    this.o.onWeightSync?.(version);
  }

  /**
   * The trainer consumed the last batch and published no new weights (it had nothing to learn from): in sync
   * mode the next iteration may start on the same version.
   */
  skipVersion(): void {
    if (this.current + this.skipped < this.batches) this.skipped++;
  }

  /** True when the dataset is exhausted and every group has been consumed. */
  done(): boolean {
    return this.nextTask >= this.order.length && this.consumed === this.admitted;
  }

  stats(): OrchestratorStats {
    return { admitted: this.admitted, running: this.admitted - this.accepted, accepted: this.accepted, consumed: this.consumed, chunksInFlight: this.inFlight.size };
  }

  private admit(): [AdmittedGroup, GroupState] {
    const task = this.order[this.nextTask] as OrchestratorTask;
    const position = this.admitted;
    const id = `${this.o.idPrefix ?? "g"}${position}`;
    const g: GroupState = { batch: { id, taskId: task.id, position, admittedAt: this.current, trajectories: [] }, open: this.o.groupSize };
    const spec: AdmittedGroup = { id, taskId: task.id, requests: [] };
    for (let i = 0; i < this.o.groupSize; i++) {
      const requestId = `${id}/s${i}`;
      g.batch.trajectories.push({ requestId, index: i, tokens: 0, versions: [] });
      const oracle = task.oracleLengths?.[i];
      spec.requests.push({ id: requestId, groupId: id, index: i, promptTokens: task.promptTokens, maxTokens: task.maxTokens, ...(oracle !== undefined ? { oracleLength: oracle } : {}) });
    }
    // The policy may refuse the group (e.g. no true lengths for oracle-lfs): nothing is admitted then.
    this.o.scheduler.addGroup(spec, this.o.clock.now());
    this.nextTask++;
    this.admitted++;
    for (const rec of g.batch.trajectories) this.trajs.set(rec.requestId, { rec, maxTokens: task.maxTokens, group: g });
    return [spec, g];
  }

  private makeBatch(groups: BatchGroup[]): RolloutBatch {
    const v = this.current;
    let tokens = 0;
    let weighted = 0;
    let max = 0;
    for (const g of groups) {
      for (const t of g.trajectories) {
        for (const s of t.versions) {
          tokens += s.tokens;
          weighted += (v - s.version) * s.tokens;
          max = Math.max(max, v - s.version);
        }
      }
    }
    return { index: this.batches++, version: v, groups, tokens, meanStaleness: tokens === 0 ? 0 : weighted / tokens, maxStaleness: max };
  }
}
