// Driving asynchronous production code under a virtual clock: between two timers, every promise
// continuation the last one started runs (a macrotask turn drains them all), so code that awaits
// (the gateway's call path, the pause gate) advances exactly as far as it can at one virtual
// instant before the clock moves on.
import { setImmediate as nextTurn } from "node:timers/promises";
import type { VirtualClock } from "../core/clock.js";
import { assertIdle, type SimEngine } from "../engine/sim-engine.js";

/**
 * Fire timers, letting promise continuations run after each, until none is left; then check that
 * every engine finished its work. `maxEvents` bounds a run that would never end (a bug).
 */
export async function settleUntilIdle(clock: VirtualClock, engines: readonly SimEngine[], maxEvents = 50_000_000): Promise<void> {
  for (let i = 0; i < maxEvents; i++) {
    await nextTurn();
    if (clock.step()) continue;
    return assertIdle(clock, engines);
  }
  throw new Error(`simulation did not go idle within ${maxEvents} events`);
}
