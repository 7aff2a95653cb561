// Shared helpers for rewards split over a program's calls: calls in index order, and the position
// of the call a tool event belongs to.
import type { Trajectory } from "../core/types.js";

/** The trajectory's calls sorted by index (positions are what `StepwiseValue.steps` refers to). */
export function callsInOrder(t: Trajectory): Trajectory["calls"] {
  return [...t.calls].sort((a, b) => a.index - b.index);
}

/** Position (in {@link callsInOrder}) of the call with `callIndex`; the last position when no call has it. */
export function positionOfCall(calls: Trajectory["calls"], callIndex: number): number {
  const i = calls.findIndex((c) => c.index === callIndex);
  return i >= 0 ? i : calls.length - 1;
}

/** Scale `steps` so they sum to `value` (they summed to `raw`); equal shares when raw is 0. */
export function rescaleSteps(steps: number[], raw: number, value: number): number[] {
  if (raw === value) return steps;
  if (raw === 0) return steps.map(() => value / steps.length);
  return steps.map((s) => (s * value) / raw);
}
