// The Clock abstraction: core logic reads time and waits only through it, so the same code runs
// under wall time (serving) and under a virtual clock (tests, simulation).

/** Handle of a scheduled timer; `cancel()` is idempotent. */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since an arbitrary epoch (wall-clock epoch for the real clock). */
  now(): number;
  /** Run `fn` once after `ms` milliseconds. */
  setTimer(ms: number, fn: () => void): Timer;
  /** Resolve after `ms` milliseconds. */
  sleep(ms: number): Promise<void>;
}

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that only moves when told to. Timers fire in (time, creation) order as `advance`
 * passes them, which makes timer-driven logic deterministic and instant to test.
 */
export class VirtualClock implements Clock {
  private t: number;
  private seq = 0;
  private pending: Pending[] = [];

  constructor(start = 0) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void): Timer {
    if (!(ms >= 0)) throw new RangeError(`timer delay must be >= 0, got ${ms}`);
    const p: Pending = { at: this.t + ms, seq: this.seq++, fn, cancelled: false };
    this.pending.push(p);
    return {
      cancel: () => {
        p.cancelled = true;
      },
    };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.setTimer(ms, resolve));
  }

  /** Number of timers not yet fired or cancelled. */
  get pendingTimers(): number {
    return this.pending.filter((p) => !p.cancelled).length;
  }

  /** Move time forward by `ms`, firing every timer due on the way, in order. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`advance must be >= 0, got ${ms}`);
    const target = this.t + ms;
    for (;;) {
      const next = this.nextDue(target);
      if (!next) break;
      this.t = next.at;
      next.cancelled = true;
      next.fn();
    }
    this.t = target;
    this.pending = this.pending.filter((p) => !p.cancelled);
  }

  /** Advance straight to the next pending timer and fire it; returns false when none is left. */
  step(): boolean {
    const next = this.nextDue(Infinity);
    if (!next) return false;
    this.advance(next.at - this.t);
    return true;
  }

  private nextDue(limit: number): Pending | undefined {
    let best: Pending | undefined;
    for (const p of this.pending) {
      if (p.cancelled || p.at > limit) continue;
      if (!best || p.at < best.at || (p.at === best.at && p.seq < best.seq)) best = p;
    }
    return best;
  }
}
