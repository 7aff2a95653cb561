// AReaL's staleness bound (TECHNIQUES §B4): how many more rollouts may start now so that no sample
// is generated more than η policy versions ahead of the trainer:
//   capacity = min(max_concurrent − running, (η + version + 1)·B − (accepted + running)).
// η = 0 is synchronous RL; η = ∞ leaves only the concurrency bound.
import { ArborError } from "../../core/errors.js";

export interface StalenessInput {
  /** Rollouts allowed at once. */
  maxConcurrent: number;
  /** Rollouts started and not yet complete. */
  running: number;
  /** Rollouts completed so far (all of them, consumed or not). */
  accepted: number;
  /** The trainer's current policy version (0 = initial weights). */
  version: number;
  /** Rollouts per training batch (B). */
  batchSize: number;
  /** η, max_head_offpolicyness; Infinity = unbounded. */
  maxStaleness: number;
}

/** Rollouts that may start now (never negative). */
export function stalenessCapacity(s: StalenessInput): number {
  if (!(s.maxStaleness >= 0)) throw new ArborError(`staleness: maxStaleness (η) must be >= 0, got ${s.maxStaleness}`, "config");
  if (!Number.isInteger(s.batchSize) || s.batchSize < 1) throw new ArborError(`staleness: batchSize must be an integer >= 1, got ${s.batchSize}`, "config");
  const byConcurrency = s.maxConcurrent - s.running;
  const byStaleness = s.maxStaleness === Infinity ? Infinity : (s.maxStaleness + s.version + 1) * s.batchSize - (s.accepted + s.running);
  return Math.max(0, Math.min(byConcurrency, byStaleness));
}
