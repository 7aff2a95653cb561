// A worker of a deployment (`arbor serve worker`): takes program work from the broker's work queue and runs each
// program exactly as the embedded rollout does (runProgram: created at the gateway, sandbox, agent, env check,
// ended at the gateway), then reports its end on the event bus and acks. Nothing is lost when a worker dies:
// its unacked programs are redelivered, and the worker that gets one looks at the store first — a program
// already ended is reported again (its end was recorded but maybe never reported), one left active by the dead
// worker is ended with a recorded termination, one never created is run. Runs the orchestrator cancels end as
// aborted, and a drain that runs out of time aborts what is left, so every program a worker took ends recorded.
import type { EventBus, EventSubscription } from "../../broker/event-bus.js";
import type { WorkConsumer, WorkMessage, WorkQueue } from "../../broker/work-queue.js";
import type { Clock, Timer } from "../../core/clock.js";
import { runProgram, endUnrunProgram, type ProgramRunOptions } from "../sync-rollout.js";
import { retrying } from "../../core/retry.js";
import { checkProgramWork, cutScope, recordedJudgement, workerLost, type ProgramEndedEvent, type ProgramWork, type RolloutEvents } from "./program-work.js";

/** How long a drain waits for the programs it aborted to record their end, ms. */
export const ABORTED_END_MS = 30_000;

/** Runs whose cancellation a worker keeps track of at once. */
const MAX_RUNS = 1024;

/** What running a work message's programs needs, built once per run config and kept. */
export type WorkerRunContext = Omit<ProgramRunOptions, "runId" | "signal">;

export interface ProgramWorkerOptions {
  /** The worker's name (in logs, events and the terminations it records for others). */
  name: string;
  queue: WorkQueue<ProgramWork>;
  bus: EventBus<RolloutEvents>;
  /** The context of a run config (`ProgramWork.config`); a throw fails the delivery. */
  contextOf(config: string): Promise<WorkerRunContext>;
  /** Programs this worker runs at once. */
  concurrency: number;
  /** While a program runs, its delivery's ack wait is restarted this often (below the queue's ack wait). */
  heartbeatMs: number;
  clock: Clock;
  log?: (line: string) => void;
}

/** A running worker; see the file header. */
export class ProgramWorker {
  private consumer: WorkConsumer | undefined;
  private subscription: EventSubscription | undefined;
  /** Aborts every program still running when a drain runs out of time. */
  private readonly stop = new AbortController();
  /** Per run and orchestrator process: aborted when that orchestrator cancels the run. */
  private readonly runs = new Map<string, AbortController>();
  private endedCount = 0;
  /** Programs being handled now, by id. */
  private readonly current = new Set<string>();
  /** The handlers running now (they outlive a consumer that gave up on them at its own drain timeout). */
  private readonly handling = new Set<Promise<void>>();

  private constructor(private readonly o: ProgramWorkerOptions) {}

  /** Subscribe to run cancellations (replaying those already published) and start taking work. */
  static async start(o: ProgramWorkerOptions): Promise<ProgramWorker> {
    const w = new ProgramWorker(o);
    w.subscription = await o.bus.subscribe("run-cancelled", (ev) => {
      w.runSignal(ev.data.runId, ev.data.session, ev.data.reason);
    }, {
      replay: "all",
      onError: (e) => w.log(`run-cancelled events: ${e.message}`),
    });
    w.consumer = o.queue.consume((m) => w.handle(m), { maxInFlight: o.concurrency, onError: (e) => w.log(`work queue: ${e.message}`) });
    return w;
  }

  /** Programs being run (or ended) now. */
  get inFlight(): number {
    return this.consumer?.inFlight ?? 0;
  }

  /** Ids of the programs being handled now. */
  get programIds(): string[] {
    return [...this.current];
  }

  /** Programs this worker reported ended. */
  get ended(): number {
    return this.endedCount;
  }

  /**
   * Stop taking work; the programs in flight get `timeoutMs` to end, after which they are aborted (each ends
   * recorded as aborted and is reported). Resolves with how many had to be aborted.
   */
  async drain(timeoutMs: number): Promise<number> {
    const consumer = this.consumer;
    if (consumer === undefined) return 0;
    const closing = consumer.close();
    let timer: Timer | undefined;
    const ranOut = new Promise<"timeout">((resolve) => (timer = this.o.clock.setTimer(timeoutMs, () => resolve("timeout"))));
    let first = await Promise.race([closing.then(() => "closed" as const, () => "given up" as const), ranOut]);
    if (first === "given up") {
      // The consumer gave up at its own drain timeout (30 s by default), before this drain's: its handlers still
      // run; they get the rest of this drain's time, then are aborted here.
      first = await Promise.race([Promise.allSettled([...this.handling]).then(() => "closed" as const), ranOut]);
    }
    timer?.cancel();
    if (first === "closed") return 0;
    const left = this.handling.size;
    this.stop.abort(new Error(`worker ${this.o.name} is stopping (drain ran out after ${timeoutMs} ms)`));
    // Each aborted program ends recorded as aborted and is reported before the worker stops (bounded: a handler
    // stuck where the abort does not reach is left to the queue's redelivery).
    let bound: Timer | undefined;
    const boundOver = new Promise<void>((resolve) => (bound = this.o.clock.setTimer(ABORTED_END_MS, resolve)));
    await Promise.race([Promise.allSettled([closing, ...this.handling]), boundOver]);
    bound?.cancel();
    return left;
  }

  /** Stop as a crashed worker would (tests): in-flight work is left unsettled, to be redelivered elsewhere. */
  async abandon(): Promise<void> {
    await this.consumer?.abandon();
    this.stop.abort(new Error(`worker ${this.o.name} died`));
    await this.subscription?.close();
  }

  /** Drain (bounded by `drainMs`) and stop listening for events. The queue and bus are the caller's to close. */
  async close(drainMs = 30_000): Promise<void> {
    await this.drain(drainMs);
    await this.subscription?.close();
  }

  private log(line: string): void {
    this.o.log?.(`worker ${this.o.name}: ${line}`);
  }

  /** The signal of a run's programs from one orchestrator process (`session`), aborted when it cuts the run. */
  private runSignal(runId: string, session: string | undefined, cancelReason?: string): AbortSignal {
    const scope = cutScope(runId, session);
    let c = this.runs.get(scope);
    if (c === undefined) {
      c = new AbortController();
      this.runs.set(scope, c);
      // Bounded: the oldest run's signal is forgotten (its programs ended long ago, or it was cut already).
      if (this.runs.size > MAX_RUNS) this.runs.delete(this.runs.keys().next().value as string);
    }
    if (cancelReason !== undefined && !c.signal.aborted) c.abort(new Error(`run ${runId} cancelled: ${cancelReason}`));
    return c.signal;
  }

  private async handle(m: WorkMessage<ProgramWork>): Promise<void> {
    const work = this.handleWork(m);
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.handling.add(settled);
    try {
      await work;
    } catch (e) {
      // The queue redelivers it (or dead-letters it on the last delivery); the reason is said here too.
      this.log(`program ${m.id} (delivery ${m.delivery} of ${m.maxDeliver}) failed: ${e instanceof Error ? e.message : String(e)}`);
      throw e;
    } finally {
      this.handling.delete(settled);
    }
  }

  private async handleWork(m: WorkMessage<ProgramWork>): Promise<void> {
    const w = checkProgramWork(m.payload);
    const ctx = await this.o.contextOf(w.config);
    const signal = AbortSignal.any([this.stop.signal, this.runSignal(w.runId, w.session)]);
    const o: ProgramRunOptions = { ...ctx, runId: w.runId, signal, recordJudgement: true };
    const beat = this.heartbeat(m);
    this.current.add(w.programId);
    try {
      const t = await ctx.store.getTrajectory(w.programId);
      const row = t?.program;
      if (row?.state === "terminated" && row.termination) {
        // Ended and recorded by a worker that stopped (or lost the broker) before it reported: report it again
        // from the store, with the judgement that worker recorded (a duplicate report is dropped by the bus).
        const judged = recordedJudgement(t?.tools ?? []) ?? { finalAnswer: "", zeroReward: false };
        const recovered = "its worker stopped after the program ended, before reporting it; reported from the store";
        await this.report(w, { termination: row.termination, calls: t?.calls.length ?? 0, ...judged, recovered });
      } else if (row !== undefined) {
        // Started by a worker that died: its agent and sandbox are gone with it, so the program ends here with
        // that said. (With no row, nothing was recorded: the program runs from the start below. A row whose
        // write had not landed yet makes the gateway refuse the creation; the next delivery then ends it here.)
        const termination = await endUnrunProgram(o, w.task, w.group, w.programId, w.sampleIndex, workerLost(m.delivery, m.maxDeliver, this.o.name));
        const calls = (await ctx.store.getTrajectory(w.programId))?.calls.length ?? 0;
        await this.report(w, { termination, calls, finalAnswer: "", zeroReward: false, recovered: "its worker stopped while it ran" });
      } else {
        const ended = await runProgram(o, w.task, w.group, w.programId, w.sampleIndex);
        const { termination, calls } = ended.result;
        await this.report(w, { termination, calls, finalAnswer: ended.ctx.finalAnswer, ...(ended.ctx.check ? { check: ended.ctx.check } : {}), zeroReward: ended.zeroReward });
      }
    } finally {
      beat.cancel();
      this.current.delete(w.programId);
    }
  }

  /** Restart the delivery's ack wait every heartbeatMs while the program runs. */
  private heartbeat(m: WorkMessage<ProgramWork>): Timer {
    let timer: Timer;
    const tick = (): void => {
      void m.inProgress().catch((e: unknown) => this.log(`heartbeat of ${m.id}: ${e instanceof Error ? e.message : String(e)}`));
      timer = this.o.clock.setTimer(this.o.heartbeatMs, tick);
    };
    timer = this.o.clock.setTimer(this.o.heartbeatMs, tick);
    return { cancel: () => timer.cancel() };
  }

  private async report(w: ProgramWork, end: Omit<ProgramEndedEvent, "programId" | "runId" | "worker">): Promise<void> {
    const event: ProgramEndedEvent = { ...end, programId: w.programId, runId: w.runId, worker: this.o.name };
    // One report per program: a second worker's report of the same end is a duplicate id; a broker out for a
    // while is ridden out (a report that still fails fails the delivery, which the next worker reports).
    await retrying(`reporting the end of ${w.programId}`, () => this.o.bus.publish("program-ended", event, `ended:${w.programId}`), this.o.clock, { onRetry: (e) => this.log(`reporting ${w.programId}: ${e.message}; retrying`) });
    this.endedCount++;
  }
}
