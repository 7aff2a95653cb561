// The wall clock: the only place in src/ outside cli/ allowed to touch Date.now and setTimeout.
import type { Clock, Timer } from "./clock.js";

/** Wall-clock implementation of {@link Clock}. */
export class RealClock implements Clock {
  now(): number {
    return Date.now();
  }

  setTimer(ms: number, fn: () => void): Timer {
    const h = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(h) };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }
}

/** Shared wall clock for I/O shells. */
export const realClock: Clock = new RealClock();
