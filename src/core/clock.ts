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

/** How many of a VirtualClock's timers are neither fired nor cancelled (shared with its timers, which cancel themselves). */
interface LiveCount {
  n: number;
}

/**
 * A pending timer of a VirtualClock, which is also the Timer handed out: one object per timer, where a handle
 * with a `cancel` closure made three (a simulation sets one timer per engine step, millions of them).
 */
class Pending implements Timer {
  cancelled = false;

  constructor(
    readonly at: number,
    readonly seq: number,
    readonly fn: () => void,
    private readonly live: LiveCount,
  ) {}

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.live.n--;
  }
}

/** Heap order: earlier time first, then creation order. */
function before(a: Pending, b: Pending): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/**
 * A clock that only moves when told to. Timers fire in (time, creation) order as `advance`
 * passes them, which makes timer-driven logic deterministic and instant to test. Pending timers sit
 * in a binary heap (a simulation keeps one per engine pending and fires millions), cancelled ones
 * are dropped lazily when they reach the top.
 */
export class VirtualClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly heap: Pending[] = [];
  private readonly live: LiveCount = { n: 0 };

  constructor(start = 0) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void): Timer {
    if (!(ms >= 0)) throw new RangeError(`timer delay must be >= 0, got ${ms}`);
    const p = new Pending(this.t + ms, this.seq++, fn, this.live);
    this.push(p);
    this.live.n++;
    return p;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.setTimer(ms, resolve));
  }

  /** Number of timers not yet fired or cancelled. */
  get pendingTimers(): number {
    return this.live.n;
  }

  /** Move time forward by `ms`, firing every timer due on the way, in order. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`advance must be >= 0, got ${ms}`);
    const target = this.t + ms;
    for (;;) {
      const next = this.top();
      if (next === undefined || next.at > target) break;
      this.pop();
      this.t = next.at;
      next.cancelled = true;
      this.live.n--;
      next.fn();
    }
    this.t = target;
  }

  /** Advance straight to the next pending timer and fire it; returns false when none is left. */
  step(): boolean {
    const next = this.top();
    if (next === undefined) return false;
    this.advance(next.at - this.t);
    return true;
  }

  /** The next timer to fire (cancelled ones at the top are dropped), or undefined. */
  private top(): Pending | undefined {
    const h = this.heap;
    while (h.length > 0 && (h[0] as Pending).cancelled) this.pop();
    return h[0];
  }

  private push(p: Pending): void {
    const h = this.heap;
    let i = h.length;
    h.push(p);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const q = h[parent] as Pending;
      if (!before(p, q)) break;
      h[i] = q;
      i = parent;
    }
    h[i] = p;
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop() as Pending;
    if (h.length === 0) return;
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(h[r] as Pending, h[l] as Pending) ? r : l;
      if (!before(h[c] as Pending, last)) break;
      h[i] = h[c] as Pending;
      i = c;
    }
    h[i] = last;
  }
}
