// The random source of a request that brings its own seed. The draw that picks the token at
// absolute sequence position p (prompt length + index) depends only on (seed, p), not on how many
// draws came before: a continuation sent as prompt ‖ tokens so far — a divided rollout's next chunk,
// a resume on new weights, a preempted request's recompute — draws exactly what the unbroken
// generation drew there. Requests without a seed keep a plain stream (the engine's Rng forks).
import { Rng } from "../core/rng.js";

/** A seeded request's Rng whose token draws are keyed by sequence position; see the file header. */
export class PositionKeyedRng extends Rng {
  /** Seeds beyond 32 bits are hashed rather than truncated, so every integer seed is its own stream. */
  static fromSeed(seed: number): PositionKeyedRng {
    if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
    return new PositionKeyedRng(seed >= 0 && seed <= 0xffffffff ? seed : new Rng(0).fork(`seed:${seed}`).seed);
  }

  /** Uniform float in [0, 1) for the token at absolute sequence position `position` (an integer >= 0). */
  drawAt(position: number): number {
    if (!Number.isInteger(position) || position < 0) throw new RangeError(`position must be an integer >= 0, got ${position}`);
    // Two rounds of a 32-bit finaliser so neighbouring positions and neighbouring seeds land far
    // apart; the Rng constructor then whitens the result through splitmix32 once more.
    const key = fmix32((this.seed >>> 0) ^ fmix32((position + 0x9e3779b9) >>> 0));
    return new Rng(key).float();
  }
}

/** MurmurHash3's 32-bit finaliser: a bijection on u32 with full avalanche. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}
