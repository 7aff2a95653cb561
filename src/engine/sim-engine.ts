// One engine under a virtual clock: the real Scheduler and KV block manager driving a step executor
// (the cost model). Event-driven: a step occupies the engine for its modelled duration and ends in
// a timer, so any number of engines (and tool calls, arrivals) interleave correctly on one clock.
// This is the engine the simulator runs by the thousand; the HTTP engine drives the same scheduler
// with the wall clock.
import type { VirtualClock } from "../core/clock.js";
import type { FinishedRequest, NewRequest, Scheduler } from "./scheduler/scheduler.js";
import type { StepPlan, StepResult } from "./scheduler/step-plan.js";

/** Runs one step plan and reports the sampled tokens and the step's duration. */
export interface StepExecutor {
  run(plan: StepPlan): StepResult;
}

export interface SimEngineOptions {
  scheduler: Scheduler;
  executor: StepExecutor;
  clock: VirtualClock;
  /** Called for each finished request, at the clock time its last step ended. */
  onFinished?: (f: FinishedRequest) => void;
}

/** A scheduler + executor pair stepping under a virtual clock. */
export class SimEngine {
  private readonly o: SimEngineOptions;
  private busy = false;
  private steps = 0;
  private busyMs = 0;
  private computedTokens = 0;
  /** The result of the step in flight, fed back when its timer fires. */
  private stepResult: StepResult | undefined;
  /** The step-end timer's callback: one function for every step, not a closure per step. */
  private readonly endStep = (): void => {
    const result = this.stepResult as StepResult;
    this.stepResult = undefined;
    this.busy = false;
    // (An index loop: the list is mostly a shared frozen empty one, over which for-of allocates.)
    const finished = this.o.scheduler.onStepDone(result);
    for (let i = 0; i < finished.length; i++) this.o.onFinished?.(finished[i] as FinishedRequest);
    this.kick();
  };

  constructor(o: SimEngineOptions) {
    this.o = o;
  }

  /** Queue a request; a step starts now if the engine is idle. */
  submit(req: NewRequest): void {
    this.o.scheduler.addRequest(req);
    this.kick();
  }

  /** Start a step if the engine is idle and has work (call after pause/restore/abort too). */
  kick(): void {
    if (this.busy) return;
    const { scheduler, executor, clock } = this.o;
    if (!scheduler.hasUnfinished()) return;
    const plan = scheduler.schedule();
    const result = executor.run(plan);
    // An empty plan (everything held or blocked) only tells the executor what finished: no step runs.
    if (plan.chunks.length === 0) return;
    this.busy = true;
    this.steps++;
    this.busyMs += result.durationMs;
    this.computedTokens += plan.numBatchedTokens;
    this.stepResult = result;
    clock.setTimer(result.durationMs, this.endStep);
  }

  /** True while unfinished requests remain (running, waiting or held). */
  hasWork(): boolean {
    return this.busy || this.o.scheduler.hasUnfinished();
  }

  /** Steps run, the clock time they took, and the tokens they computed (prefill, recompute and decode). */
  get usage(): { steps: number; busyMs: number; computedTokens: number } {
    return { steps: this.steps, busyMs: this.busyMs, computedTokens: this.computedTokens };
  }
}

/**
 * Fire timers until none is left, then check that every engine finished its work. `maxEvents`
 * bounds a run that would never end (a bug), with a clear error.
 */
export function runUntilIdle(clock: VirtualClock, engines: readonly SimEngine[], maxEvents = 50_000_000): void {
  for (let i = 0; i < maxEvents; i++) {
    if (clock.step()) continue;
    return assertIdle(clock, engines);
  }
  throw new Error(`simulation did not go idle within ${maxEvents} events`);
}

/** Throws when an engine still has work once no timer is pending (nothing would ever schedule it). */
export function assertIdle(clock: VirtualClock, engines: readonly SimEngine[]): void {
  const stuck = engines.filter((e) => e.hasWork()).length;
  if (stuck > 0) throw new Error(`${stuck} engine(s) stuck at ${clock.now()} ms: unfinished requests but nothing schedulable and no timer pending`);
}
