// The orchestrator's side of programs run on workers (`arbor run --cluster`): a ProgramRunner that publishes each
// program as work (its id the de-duplication key) and resolves when a worker reports its end on the event bus;
// the trajectory is then read from the shared store and rewarded by the orchestrator as in the embedded mode.
// Nothing waits forever: a program whose work ran out of deliveries (dead-lettered) is ended here with the dead
// letter's reason; when the run is cut, workers are told (run-cancelled) and whatever no worker ended within
// `cancelGraceMs` is ended here as aborted. Every program the rollout started thus ends with a recorded outcome.
// A cut names this process (its session): a run resumed by another process keeps the run id, not the cut; the
// resumed process cuts what the killed one left (`cutEarlier`).
import { randomUUID } from "node:crypto";
import type { EventBus, EventSubscription } from "../../broker/event-bus.js";
import { retrying } from "../../core/retry.js";
import type { WorkQueue } from "../../broker/work-queue.js";
import type { Clock, Timer } from "../../core/clock.js";
import type { Group, Termination } from "../../core/types.js";
import type { Task } from "../../envs/env.js";
import { endedProgram, endUnrunProgram, type EndedProgram, type ProgramRunner, type ProgramRunOptions } from "../sync-rollout.js";
import { cutScope, recordedJudgement, type ProgramEndedEvent, type ProgramWork, type RolloutEvents } from "./program-work.js";

export interface RemoteProgramsOptions {
  queue: WorkQueue<ProgramWork>;
  bus: EventBus<RolloutEvents>;
  /** The run config the workers build their context from (`ProgramWork.config`). */
  config: string;
  clock: Clock;
  /** How often dead letters are looked for while programs are out (default 2,000 ms). */
  pollMs?: number;
  /** After a cut, how long workers get to end the run's programs before they are ended here (default 60,000 ms). */
  cancelGraceMs?: number;
  /** Programs out with no report for this long are said in the log, once per quiet spell (default 60,000 ms). */
  quietWarnMs?: number;
  log?: (line: string) => void;
}

type RunOptions = Omit<ProgramRunOptions, "sandboxes">;

interface Pending {
  o: RunOptions;
  task: Task;
  group: Group;
  sampleIndex: number;
  resolve(ended: EndedProgram): void;
  reject(error: unknown): void;
  /** Being ended here (dead letter, cancel grace): a worker's late report is then ignored. */
  ending: boolean;
}

/** Programs run on workers; see the file header. Open with {@link RemotePrograms.start}. */
export class RemotePrograms implements ProgramRunner {
  private readonly pending = new Map<string, Pending>();
  /** Cut runs and the cut's reason. */
  private readonly cancelled = new Map<string, string>();
  /** Cut runs whose grace timer is armed and has not fired. */
  private readonly graceArmed = new Set<string>();
  private readonly watched = new Set<string>();
  /** This orchestrator process's id on its work and its cuts (program-work.ts `ProgramWork.session`). */
  readonly session = randomUUID();
  private subscription: EventSubscription | undefined;
  private poll: Timer | undefined;
  private lastReport: number;
  private warned = false;
  private closed = false;

  private constructor(private readonly o: RemoteProgramsOptions) {
    this.lastReport = o.clock.now();
  }

  /** Subscribe to program ends (from now on) and return the runner. */
  static async start(o: RemoteProgramsOptions): Promise<RemotePrograms> {
    const r = new RemotePrograms(o);
    r.subscription = await o.bus.subscribe("program-ended", (ev) => r.onEnded(ev.data), {
      replay: "new",
      onError: (e) => r.log(`program-ended events: ${e.message}`),
    });
    return r;
  }

  /** Programs published and not yet ended. */
  get outstanding(): number {
    return this.pending.size;
  }

  run(o: RunOptions, task: Task, group: Group, programId: string, sampleIndex: number): Promise<EndedProgram> {
    const ended = new Promise<EndedProgram>((resolve, reject) => {
      this.pending.set(programId, { o, task, group, sampleIndex, resolve, reject, ending: false });
    });
    const work: ProgramWork = { v: 1, runId: o.runId, config: this.o.config, task, group, programId, sampleIndex, session: this.session };
    retrying(`publishing program ${programId}`, () => this.o.queue.publish(programId, work), this.o.clock, { onRetry: (e) => this.log(`publishing ${programId}: ${e.message}; retrying`) }).then(
      () => this.watch(o),
      (e: unknown) => this.settle(programId, (p) => p.reject(e)),
    );
    return ended;
  }

  /**
   * Cut what an earlier orchestrator process of run `runId` left on the workers (`session`: its work's, which the
   * run's resume.json keeps): its queued programs end unrun and its running ones are aborted, with `reason`. A
   * resumed run does this as it starts, so that the killed process's programs do not take the engines beside its own.
   */
  cutEarlier(runId: string, session: string, reason: string): Promise<void> {
    return this.announceCut(runId, session, reason);
  }

  /** Tell the workers that the programs of `runId` from orchestrator `session` are cut (once per run and session). */
  private async announceCut(runId: string, session: string, reason: string): Promise<void> {
    const event = { runId, reason, session };
    await retrying(`announcing the cut of ${runId}`, () => this.o.bus.publish("run-cancelled", event, `cancel:${cutScope(runId, session)}`), this.o.clock);
  }

  /** Stop listening and polling; programs still out are rejected (the rollout is over). */
  async close(): Promise<void> {
    this.closed = true;
    this.poll?.cancel();
    await this.subscription?.close();
    for (const id of [...this.pending.keys()]) this.settle(id, (p) => p.reject(new Error(`program ${id}: the orchestrator closed before it ended`)));
  }

  private log(line: string): void {
    this.o.log?.(`workers  ${line}`);
  }

  private settle(programId: string, fn: (p: Pending) => void): void {
    const p = this.pending.get(programId);
    if (p === undefined) return;
    this.pending.delete(programId);
    fn(p);
  }

  private onEnded(ev: ProgramEndedEvent): void {
    const p = this.pending.get(ev.programId);
    if (p === undefined || p.ending) return;
    this.lastReport = this.o.clock.now();
    this.warned = false;
    if (ev.recovered !== undefined) this.log(`program ${ev.programId} ended by ${ev.worker}: ${ev.recovered}`);
    this.pending.delete(ev.programId);
    endedProgram(p.o, p.task, p.group, ev.programId, ev).then(p.resolve, p.reject);
  }

  /**
   * On the run's cut, tell the workers once and arm the grace period; keep the dead-letter poll running. A program
   * published once its run was cut (the rollout ends its unstarted programs so) is under a grace period too.
   */
  private watch(o: RunOptions): void {
    const signal = o.signal;
    // One listener per run, not per program: the run's cut signal is shared by all its programs.
    if (signal !== undefined && !this.watched.has(o.runId)) {
      this.watched.add(o.runId);
      const cancel = (): void => {
        if (this.cancelled.has(o.runId)) return;
        const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "cut");
        this.cancelled.set(o.runId, reason);
        this.announceCut(o.runId, this.session, reason).catch((e: unknown) => this.log(`cannot announce the cut of ${o.runId}: ${String(e)}`));
        this.armGrace(o.runId, reason);
      };
      if (signal.aborted) cancel();
      else signal.addEventListener("abort", cancel, { once: true });
    }
    const cut = this.cancelled.get(o.runId);
    if (cut !== undefined) this.armGrace(o.runId, cut);
    this.schedulePoll();
  }

  /** End the cut run's programs no worker ended within the grace (one timer at a time per run). */
  private armGrace(runId: string, reason: string): void {
    if (this.graceArmed.has(runId)) return;
    this.graceArmed.add(runId);
    this.o.clock.setTimer(this.o.cancelGraceMs ?? 60_000, () => {
      this.graceArmed.delete(runId);
      this.endLeft(runId, reason);
    });
  }

  private schedulePoll(): void {
    if (this.poll !== undefined || this.closed) return;
    this.poll = this.o.clock.setTimer(this.o.pollMs ?? 2000, () => {
      void this.checkDeadLetters().finally(() => {
        this.poll = undefined;
        if (this.pending.size > 0) this.schedulePoll();
      });
    });
  }

  private async checkDeadLetters(): Promise<void> {
    if (this.pending.size === 0) return;
    const quiet = this.o.clock.now() - this.lastReport;
    if (!this.warned && quiet >= (this.o.quietWarnMs ?? 60_000)) {
      this.warned = true;
      this.log(`${this.pending.size} program(s) out and no worker reported an end for ${Math.round(quiet / 1000)} s: are workers running (arbor serve worker)?`);
    }
    let dead;
    try {
      dead = await this.o.queue.deadLetters();
    } catch (e) {
      this.log(`cannot read dead letters: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    for (const dl of dead) {
      if (this.pending.has(dl.id)) {
        this.endHere(dl.id, { kind: "aborted", detail: `no worker ended it: dead-lettered after ${dl.deliveries} deliveries (${dl.reason})` });
      }
    }
  }

  private endLeft(runId: string, reason: string): void {
    for (const [id, p] of this.pending) {
      if (p.o.runId === runId) this.endHere(id, { kind: "aborted", detail: `run cut (${reason}); no worker ended it in time` });
    }
  }

  /** End a program here (its work is dead or its run cut) and resolve it with what the store holds. */
  private endHere(programId: string, termination: Termination): void {
    const p = this.pending.get(programId);
    if (p === undefined || p.ending) return;
    p.ending = true;
    const finish = async (): Promise<EndedProgram> => {
      const recorded = await endUnrunProgram(p.o, p.task, p.group, programId, p.sampleIndex, termination);
      const t = await p.o.store.getTrajectory(programId);
      // A worker may have ended and judged it, then failed to report: its recorded judgement is the program's.
      const judged = recordedJudgement(t?.tools ?? []) ?? { finalAnswer: "", zeroReward: false };
      return endedProgram(p.o, p.task, p.group, programId, { termination: recorded, calls: t?.calls.length ?? 0, ...judged });
    };
    finish().then(
      (ended) => this.settle(programId, (x) => x.resolve(ended)),
      (e: unknown) => this.settle(programId, (x) => x.reject(e)),
    );
  }
}
