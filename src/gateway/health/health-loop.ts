// The timer shell around HealthTracker: runs due health checks on the injected clock, reports
// rotation changes, and re-arms itself for the next due check (never polling when none is due).
import type { Clock, Timer } from "../../core/clock.js";
import { HealthTracker, type HealthTrackerOptions, type HealthTransition } from "./health-tracker.js";

export interface HealthLoopOptions extends HealthTrackerOptions {
  clock: Clock;
  /** Resolves when the backend is healthy; rejects with the reason otherwise. */
  check(backend: string): Promise<void>;
  /** Called on every rotation change (the gateway updates its router and metrics). */
  onTransition(t: HealthTransition): void;
}

/** Health checking of a set of backends; `start()` arms the timer, `stop()` cancels it. */
export class HealthLoop {
  readonly tracker: HealthTracker;
  private timer: Timer | undefined;
  private running = false;

  constructor(private readonly opts: HealthLoopOptions) {
    this.tracker = new HealthTracker(opts, opts.clock.now());
  }

  /** Start checking (idempotent). */
  start(): void {
    this.running = true;
    this.arm();
  }

  /** Stop checking; checks in flight still finish but arm nothing. */
  stop(): void {
    this.running = false;
    this.timer?.cancel();
    this.timer = undefined;
  }

  /** A call to `backend` failed at the transport level: out of rotation until a check passes. */
  callFailed(backend: string, cause: string): void {
    this.report(this.tracker.onCallFailed(backend, this.opts.clock.now(), cause));
    this.arm();
  }

  /** Run every due check now (the timer's body; tests may call it directly). */
  runDue(): Promise<void> {
    const clock = this.opts.clock;
    const checks = this.tracker.due(clock.now()).map(async (b) => {
      let error: string | undefined;
      try {
        await this.opts.check(b);
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
      }
      this.report(this.tracker.onCheck(b, clock.now(), error));
      this.arm();
    });
    this.arm();
    return Promise.all(checks).then(() => undefined);
  }

  private report(t: HealthTransition | undefined): void {
    if (t) this.opts.onTransition(t);
  }

  private arm(): void {
    this.timer?.cancel();
    this.timer = undefined;
    if (!this.running) return;
    const wait = this.tracker.nextDueIn(this.opts.clock.now());
    if (wait === undefined) return;
    this.timer = this.opts.clock.setTimer(wait, () => {
      this.timer = undefined;
      void this.runDue();
    });
  }
}
