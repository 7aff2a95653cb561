// The program table (ThunderAgent §A2, v0 subset): what the gateway knows about each agent episode
// between its calls — state, phase, context size, bound backend. I/O-free; time comes from a Clock.
import type { Clock } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";

export type ProgramPhase = "reasoning" | "acting";

/** One row of the table (a snapshot copy when returned). */
export interface ProgramEntry {
  id: string;
  state: "active" | "terminated";
  /** Calls that completed successfully. */
  calls: number;
  /** Calls currently at a backend. */
  inFlight: number;
  /** Prompt + output tokens of the last successful call: the program's KV footprint. */
  contextTokens: number;
  /** Backend of the latest call (null before the first). */
  backend: string | null;
  /** "reasoning" while a call is in flight, "acting" between calls (the agent runs tools). */
  phase: ProgramPhase;
  openedAt: number;
  lastActivity: number;
  releasedAt?: number;
}

export interface ProgramTableOptions {
  clock: Clock;
  /** Active programs at most; opening one more is a CapacityError. */
  maxPrograms: number;
  /**
   * Released programs remembered (so their late calls get a clear 409), oldest forgotten first.
   * Defaults to maxPrograms.
   */
  maxReleased?: number;
  /**
   * Release programs idle (no call in flight) for at least this many ms via {@link ProgramTable.releaseIdle}.
   * Absent (default): programs are released only explicitly.
   */
  idleReleaseMs?: number;
}

const PROGRAM_ID = /^[\x21-\x7e]{1,256}$/;

interface Row extends ProgramEntry {
  /** Index the next call will get. */
  nextIndex: number;
}

/** Per-program state machine driven by the gateway around each upstream call. */
export class ProgramTable {
  private readonly clock: Clock;
  private readonly maxPrograms: number;
  private readonly maxReleased: number;
  private readonly idleReleaseMs: number | undefined;
  private readonly active = new Map<string, Row>();
  // Insertion order = release order, so the first key is the oldest tombstone.
  private readonly released = new Map<string, Row>();
  private terminatedTotal = 0;

  constructor(opts: ProgramTableOptions) {
    if (!(Number.isInteger(opts.maxPrograms) && opts.maxPrograms >= 1)) {
      throw new ArborError(`maxPrograms: must be an integer >= 1, got ${opts.maxPrograms}`, "config");
    }
    const maxReleased = opts.maxReleased ?? opts.maxPrograms;
    if (!(Number.isInteger(maxReleased) && maxReleased >= 0)) {
      throw new ArborError(`maxReleased: must be an integer >= 0, got ${maxReleased}`, "config");
    }
    const idle = opts.idleReleaseMs;
    if (idle !== undefined && !(Number.isInteger(idle) && idle >= 1)) {
      throw new ArborError(`idleReleaseMs: must be an integer >= 1, got ${idle}`, "config");
    }
    this.idleReleaseMs = idle;
    this.clock = opts.clock;
    this.maxPrograms = opts.maxPrograms;
    this.maxReleased = maxReleased;
  }

  /** Active programs. */
  get size(): number {
    return this.active.size;
  }

  /**
   * Open a program, or return it if already active (idempotent). Throws 409-class
   * `program_released` for a released id, `capacity` at the limit, `invalid_request` for a bad id.
   */
  open(id: string): ProgramEntry {
    const existing = this.active.get(id);
    if (existing) return snapshot(existing);
    if (!PROGRAM_ID.test(id)) {
      throw new ArborError(
        `program id: must be 1-256 printable ASCII characters without spaces, got '${id.slice(0, 64)}'`,
        "invalid_request",
      );
    }
    if (this.released.has(id)) throw releasedError(id);
    if (this.active.size >= this.maxPrograms) throw new CapacityError("program table", this.maxPrograms);
    const now = this.clock.now();
    const row: Row = {
      id,
      state: "active",
      calls: 0,
      inFlight: 0,
      contextTokens: 0,
      backend: null,
      phase: "acting",
      openedAt: now,
      lastActivity: now,
      nextIndex: 0,
    };
    this.active.set(id, row);
    return snapshot(row);
  }

  /** A call of an open program starts: returns its 0-based index within the program. */
  beginCall(id: string): number {
    const row = this.mustBeActive(id);
    row.inFlight++;
    row.phase = "reasoning";
    row.lastActivity = this.clock.now();
    return row.nextIndex++;
  }

  /** Record which backend serves the program's current call. */
  bind(id: string, backend: string): void {
    const row = this.find(id);
    if (row) row.backend = backend;
  }

  /**
   * A call finished successfully with `tokens` = prompt + output length. Tolerates a program
   * released meanwhile (the call's tokens are real and still get recorded).
   */
  endCall(id: string, tokens: number): void {
    const row = this.find(id);
    if (!row) return;
    row.inFlight = Math.max(0, row.inFlight - 1);
    row.calls++;
    row.contextTokens = tokens;
    this.settle(row);
  }

  /**
   * A call failed (upstream error, timeout, client gone): nothing was recorded. The index is
   * handed out again when no later call began meanwhile, so recorded indices stay contiguous.
   */
  failCall(id: string, index: number): void {
    const row = this.find(id);
    if (!row) return;
    row.inFlight = Math.max(0, row.inFlight - 1);
    if (index === row.nextIndex - 1) row.nextIndex--;
    this.settle(row);
  }

  /**
   * Forget a program that never made a call and has none in flight, as if never opened (no
   * tombstone: the id stays usable). A request that fails validation or upstream must not hold a
   * table slot: fresh ids on invalid requests would otherwise fill the table for good. Returns
   * whether it was forgotten.
   */
  discardUnused(id: string): boolean {
    const row = this.active.get(id);
    if (!row || row.calls > 0 || row.inFlight > 0) return false;
    this.active.delete(id);
    return true;
  }

  /** Terminate a program: later calls are rejected. Idempotent; throws `program_unknown` for an unknown id. */
  release(id: string): ProgramEntry {
    const done = this.released.get(id);
    if (done) return snapshot(done);
    const row = this.active.get(id);
    if (!row) throw new ArborError(`program '${id}' is not known to the gateway`, "program_unknown");
    this.terminate(row, this.clock.now());
    return snapshot(row);
  }

  /**
   * Release every active program with no call in flight whose last activity is at least
   * `idleReleaseMs` before `now`; returns their ids (empty when idle release is off).
   */
  releaseIdle(now: number = this.clock.now()): string[] {
    const idle = this.idleReleaseMs;
    if (idle === undefined) return [];
    const expired = [...this.active.values()].filter((r) => r.inFlight === 0 && now - r.lastActivity >= idle);
    for (const row of expired) this.terminate(row, now);
    return expired.map((r) => r.id);
  }

  /**
   * Ms from `now` until the next program could become idle-expired: when the idle timer should
   * next look. Programs with a call in flight expire no sooner than `idleReleaseMs` after it ends,
   * so a full period is a safe default. Undefined when idle release is off.
   */
  nextIdleCheckMs(now: number = this.clock.now()): number | undefined {
    const idle = this.idleReleaseMs;
    if (idle === undefined) return undefined;
    let wait = idle;
    for (const r of this.active.values()) {
      if (r.inFlight === 0) wait = Math.min(wait, r.lastActivity + idle - now);
    }
    return Math.max(1, wait);
  }

  /** Programs per state: active now, and terminated since the table was made (forgotten tombstones included). */
  counts(): { active: number; terminated: number } {
    return { active: this.active.size, terminated: this.terminatedTotal };
  }

  private terminate(row: Row, at: number): void {
    this.active.delete(row.id);
    this.terminatedTotal++;
    row.state = "terminated";
    row.releasedAt = at;
    row.lastActivity = at;
    if (this.maxReleased > 0) {
      this.released.set(row.id, row);
      while (this.released.size > this.maxReleased) {
        const oldest = this.released.keys().next().value as string;
        this.released.delete(oldest);
      }
    }
  }

  /** The program's entry (active or remembered released), or undefined. */
  get(id: string): ProgramEntry | undefined {
    const row = this.find(id);
    return row ? snapshot(row) : undefined;
  }

  /** Snapshots of all active programs, in opening order. */
  list(): ProgramEntry[] {
    return [...this.active.values()].map(snapshot);
  }

  private find(id: string): Row | undefined {
    return this.active.get(id) ?? this.released.get(id);
  }

  private mustBeActive(id: string): Row {
    const row = this.active.get(id);
    if (row) return row;
    if (this.released.has(id)) throw releasedError(id);
    throw new ArborError(`program '${id}' is not open`, "program_unknown");
  }

  private settle(row: Row): void {
    row.phase = row.inFlight > 0 ? "reasoning" : "acting";
    row.lastActivity = this.clock.now();
  }
}

function releasedError(id: string): ArborError {
  return new ArborError(`program '${id}' was released; it accepts no more calls`, "program_released");
}

function snapshot(row: Row): ProgramEntry {
  const { nextIndex: _n, ...entry } = row;
  return entry;
}
