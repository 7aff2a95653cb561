// Per-program admission limits: at most N calls in flight and a token-bucket request rate with a
// burst. I/O-free: time comes only from the Clock, so the simulator drives it with a VirtualClock.
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { rateLimited } from "./auth-errors.js";

export interface ProgramLimits {
  /** Calls of one program at a backend at once (default unlimited); beyond it → 429. */
  maxInFlightPerProgram?: number;
  /** Sustained requests per second per program (default unlimited); beyond the bucket → 429 with retry-after. */
  requestsPerSecond?: number;
  /** Bucket size: requests a program may send at once after being idle (default max(1, requestsPerSecond)). */
  burst?: number;
}

interface State {
  inFlight: number;
  tokens: number;
  refilledAt: number;
}

/** Admits or rejects one program's calls; every admitted call must be ended with the returned `done`. */
export class ProgramLimiter {
  private readonly maxInFlight: number;
  private readonly rate: number;
  private readonly burst: number;
  private readonly states = new Map<string, State>();
  private sweepAt = 1024;

  constructor(
    private readonly clock: Clock,
    limits: ProgramLimits = {},
  ) {
    this.maxInFlight = limits.maxInFlightPerProgram ?? Infinity;
    this.rate = limits.requestsPerSecond ?? Infinity;
    this.burst = limits.burst ?? Math.max(1, Number.isFinite(this.rate) ? this.rate : 1);
    if (limits.maxInFlightPerProgram !== undefined && !(Number.isInteger(this.maxInFlight) && this.maxInFlight >= 1)) {
      throw new ArborError(`limits.maxInFlightPerProgram: must be an integer >= 1, got ${limits.maxInFlightPerProgram}`, "config");
    }
    if (limits.requestsPerSecond !== undefined && !(Number.isFinite(this.rate) && this.rate > 0)) {
      throw new ArborError(`limits.requestsPerSecond: must be a number > 0, got ${limits.requestsPerSecond}`, "config");
    }
    if (!(Number.isFinite(this.burst) && this.burst >= 1)) {
      throw new ArborError(`limits.burst: must be a number >= 1, got ${limits.burst}`, "config");
    }
  }

  /** Whether any limit is set (an unlimited limiter keeps no per-program state). */
  get active(): boolean {
    return Number.isFinite(this.maxInFlight) || Number.isFinite(this.rate);
  }

  /**
   * Admit one call of `programId` or throw a 429 GatewayRejection. A call refused for concurrency
   * spends no rate token. Returns an idempotent `done` to call when the call ends, however it ends.
   */
  admit(programId: string): () => void {
    if (!this.active) return () => {};
    const now = this.clock.now();
    let s = this.states.get(programId);
    if (!s) {
      if (this.states.size >= this.sweepAt) this.sweep(now);
      s = { inFlight: 0, tokens: this.burst, refilledAt: now };
      this.states.set(programId, s);
    }
    if (s.inFlight >= this.maxInFlight) {
      throw rateLimited(`program '${programId}' already has ${s.inFlight} calls in flight (limit ${this.maxInFlight}); wait for one to finish`);
    }
    if (Number.isFinite(this.rate)) {
      s.tokens = Math.min(this.burst, s.tokens + ((now - s.refilledAt) / 1000) * this.rate);
      s.refilledAt = now;
      if (s.tokens < 1) {
        const waitMs = ((1 - s.tokens) / this.rate) * 1000;
        throw rateLimited(
          `program '${programId}' exceeded ${this.rate} requests/s (burst ${this.burst}); retry in ${Math.ceil(waitMs)} ms`,
          waitMs,
        );
      }
      s.tokens -= 1;
    }
    s.inFlight++;
    const state = s;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      state.inFlight--;
      this.dropIfIdle(programId, state);
    };
  }

  /** Calls of `programId` currently admitted. */
  inFlight(programId: string): number {
    return this.states.get(programId)?.inFlight ?? 0;
  }

  /** Forget a released program's state (a late `done` still balances its own counter). */
  forget(programId: string): void {
    this.states.delete(programId);
  }

  /** Programs with state kept (bounded by active programs: full, idle buckets are dropped). */
  get size(): number {
    return this.states.size;
  }

  // Amortised O(1): sweeps run only when the map has doubled since the last one.
  private sweep(now: number): void {
    for (const [id, s] of this.states) {
      if (s.inFlight === 0 && s.tokens + ((now - s.refilledAt) / 1000) * this.rate >= this.burst) this.states.delete(id);
    }
    this.sweepAt = Math.max(1024, 2 * this.states.size);
  }

  // A program with nothing in flight and a bucket that will be full by its next call needs no state:
  // dropping it keeps the map bounded by the active programs, not by every program ever seen.
  private dropIfIdle(programId: string, s: State): void {
    if (s.inFlight > 0 || this.states.get(programId) !== s) return;
    if (!Number.isFinite(this.rate) || s.tokens >= this.burst) this.states.delete(programId);
  }
}
