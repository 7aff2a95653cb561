// One engine under a virtual clock: the real Scheduler and KV block manager driving a step executor
// (the cost model). Each step's modelled duration advances the clock, so timers (tool calls,
// arrivals) interleave with steps exactly as they would in time. This is the engine the simulator
// runs by the thousand; the HTTP engine drives the same scheduler with the wall clock.
import type { VirtualClock } from "../core/clock.js";
import type { FinishedRequest, NewRequest, Scheduler } from "./scheduler/scheduler.js";
import type { StepPlan, StepResult } from "./scheduler/step-plan.js";

/** Runs one step plan and reports the sampled tokens and the step's duration. */
export interface StepExecutor {
  run(plan: StepPlan, kvTokensOf: (requestId: string) => number): StepResult;
}

/** What one `step()` did. */
export interface SimStep {
  plan: StepPlan;
  result: StepResult;
  finished: FinishedRequest[];
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
  private busyMs = 0;
  private steps = 0;
  private computedTokens = 0;

  constructor(o: SimEngineOptions) {
    this.o = o;
  }

  submit(req: NewRequest): void {
    this.o.scheduler.addRequest(req);
  }

  /** Run one step if any request is unfinished (its plan may be empty: all held or blocked); null when idle. */
  step(): SimStep | null {
    const { scheduler, executor, clock } = this.o;
    if (!scheduler.hasUnfinished()) return null;
    const plan = scheduler.schedule();
    const result = executor.run(plan, (id) => scheduler.requestState(id)?.numComputedTokens ?? 0);
    // An empty plan (everything held or blocked) only tells the executor what finished: no step runs.
    if (plan.chunks.length === 0) return { plan, result, finished: [] };
    clock.advance(result.durationMs);
    this.busyMs += result.durationMs;
    this.steps++;
    this.computedTokens += plan.numBatchedTokens;
    const finished = scheduler.onStepDone(result);
    for (const f of finished) this.o.onFinished?.(f);
    return { plan, result, finished };
  }

  /**
   * Step until no request is unfinished and no timer is pending (timers may submit more work).
   * `maxSteps` bounds a run that would never end (a bug), with a clear error.
   */
  runUntilIdle(maxSteps = 10_000_000): void {
    const { clock } = this.o;
    for (let i = 0; i < maxSteps; i++) {
      const s = this.step();
      if (s && s.plan.chunks.length > 0) continue;
      // Nothing to compute now: jump to the next timer (a tool returning, a request arriving).
      if (clock.step()) continue;
      if (!s) return;
      throw new Error(`engine is stuck at ${clock.now()} ms: unfinished requests but nothing schedulable and no timer pending`);
    }
    throw new Error(`engine did not go idle within ${maxSteps} steps`);
  }

  /** Steps run, the clock time they took, and the tokens they computed (prefill, recompute and decode). */
  get usage(): { steps: number; busyMs: number; computedTokens: number } {
    return { steps: this.steps, busyMs: this.busyMs, computedTokens: this.computedTokens };
  }
}
