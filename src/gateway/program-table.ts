// The program table (ThunderAgent §A2, v0 subset): what the gateway knows about each agent episode
// between its calls — state, phase, context size, bound backend. It is the one owner of a program's
// lifecycle: with a store it creates and ends the program's stored row and tracks the writes of its
// calls, so a program ends in the store only after all its calls are recorded. Time comes from a
// Clock and the store is injected, so the table runs under a virtual clock in tests and simulation.
import type { Clock } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import type { Group, Program, Termination } from "../core/types.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";

/** The store writes of a store-backed table: program rows (and a group for a program created without one). */
export type ProgramStore = Pick<TrajectoryStore, "createGroup" | "createProgram" | "endProgram">;

/** Where a created program belongs in the store. */
export interface ProgramPlace {
  /** Default: the table's `runId`. */
  runId?: string;
  /** Default: a group of its own, with the program's id. */
  groupId?: string;
  /** Required with `groupId` (the group's task); default `none` for a group of its own. */
  taskId?: string;
  /** Default 0. */
  sampleIndex?: number;
  variant?: Program["variant"];
}

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
  /** The group named at creation (a GRPO group: its siblings share speculative decoding's draft tree). */
  groupId?: string;
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
  /**
   * The store that holds the programs' rows. With it, a program must be created ({@link ProgramTable.create})
   * before its calls, which are refused for unknown ids; without it (a trace-only gateway) a program
   * is opened by its first call.
   */
  store?: ProgramStore;
  /** Run of programs created without one (store-backed tables). */
  runId?: string;
  /** Told when a store write that no caller awaits fails (a program's end after idle release or close). */
  onStoreError?: (programId: string, error: Error) => void;
}

/** How a program ends when nobody said how: released by the client without a termination. */
export const RELEASED: Termination = { kind: "completed", detail: "released without a termination" };

const PROGRAM_ID = /^[\x21-\x7e]{1,256}$/;

interface Row extends ProgramEntry {
  /** Index the next call will get. */
  nextIndex: number;
  /** Store-backed: the program's row is still being created (its calls are refused until it is). */
  creating?: boolean;
  /** Store-backed: resolves true once its row exists, false if the store refused it. */
  created?: Promise<boolean>;
  /** Resolved when no call is in flight any more (see {@link ProgramTable.endInStore}). */
  idleWaiters: (() => void)[];
  /** Writes of its calls not yet settled. */
  writes: Set<Promise<void>>;
  /** The first of its calls that could not be recorded, and why: its later calls are refused. */
  unrecorded?: string;
  /** Store-backed: the write that ends the program's row, once it was terminated. */
  ended?: Promise<void>;
  /** Store-backed: the end the store refused (a full write queue, an outage), written again when next asked. */
  endRefused?: { termination: Termination; at: number };
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
  private readonly store: ProgramStore | undefined;
  private readonly runId: string | undefined;
  private readonly onStoreError: (programId: string, error: Error) => void;
  /** Terminated programs whose row has not ended yet (kept even when their tombstone is forgotten). */
  private readonly ending = new Map<string, Row>();
  /** Every store write in flight (calls and ends), for {@link ProgramTable.drain}. */
  private readonly writing = new Set<Promise<unknown>>();

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
    this.store = opts.store;
    this.runId = opts.runId;
    this.onStoreError = opts.onStoreError ?? (() => undefined);
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
      writes: new Set(),
      idleWaiters: [],
    };
    this.active.set(id, row);
    return snapshot(row);
  }

  /**
   * Create a program: open it and, store-backed, create its row at `place` (and a group of its own
   * when no group is named). Throws `program_exists` for an id the table knows, what {@link open}
   * throws, and `invalid_request` when the store refuses the row (nothing is kept then).
   */
  async create(id: string, place: ProgramPlace = {}): Promise<ProgramEntry> {
    if (this.find(id)) throw new ArborError(`program '${id}' already exists; create each program once`, "program_exists");
    const store = this.store;
    if (!store && (place.runId !== undefined || place.groupId !== undefined)) {
      throw new ArborError(`${place.runId !== undefined ? "run_id" : "group_id"}: this gateway has no store to place the program in; start it with a store`, "invalid_request");
    }
    const runId = place.runId ?? this.runId;
    if (store && runId === undefined) throw new ArborError("run_id: required, this gateway has no default run for its programs (create one with POST /runs)", "invalid_request");
    if (store && place.groupId !== undefined && place.taskId === undefined) {
      throw new ArborError("task_id: required with group_id (the group's task)", "invalid_request");
    }
    this.open(id);
    const row = this.active.get(id) as Row;
    if (place.groupId !== undefined) row.groupId = place.groupId;
    if (!store) return snapshot(row);
    row.creating = true;
    let createdFlag!: (ok: boolean) => void;
    row.created = new Promise<boolean>((resolve) => (createdFlag = resolve));
    const program: Program = {
      id,
      runId: runId as string,
      taskId: place.taskId ?? "none",
      groupId: place.groupId ?? id,
      sampleIndex: place.sampleIndex ?? 0,
      state: "active",
      createdAt: row.openedAt,
      ...(place.variant ? { variant: place.variant } : {}),
    };
    try {
      if (place.groupId === undefined) {
        const own: Group = { id, runId: program.runId, taskId: program.taskId, programIds: [] };
        await this.tracked(store.createGroup(own));
      }
      await this.tracked(store.createProgram(program));
    } catch (e) {
      this.active.delete(id);
      createdFlag(false);
      throw new ArborError(`program '${id}' could not be created in the store: ${e instanceof Error ? e.message : String(e)}`, "invalid_request");
    }
    row.creating = false;
    createdFlag(true);
    return snapshot(row);
  }

  /**
   * Take back a program whose row is active in the store (created by this gateway before it restarted, or by
   * another replica): it is active again here, its next call numbered after the `calls` already recorded.
   * Idempotent for a program the table holds; throws at the table's capacity.
   */
  restore(id: string, calls: number): ProgramEntry {
    const held = this.active.get(id);
    if (held) return snapshot(held);
    this.open(id);
    const row = this.active.get(id) as Row;
    row.calls = calls;
    row.nextIndex = calls;
    row.created = Promise.resolve(true);
    return snapshot(row);
  }

  /**
   * The program a call names, ready for {@link beginCall}: a trace-only table opens it on its first
   * call; a store-backed one requires it created (`program_unknown` otherwise).
   */
  admit(id: string): void {
    if (!this.store) this.open(id);
  }

  /** A call of an open program starts: returns its 0-based index within the program. */
  beginCall(id: string): number {
    const row = this.mustBeActive(id);
    if (row.creating) throw new ArborError(`program '${id}' is still being created`, "program_unknown");
    if (row.unrecorded !== undefined) {
      throw new ArborError(`program '${id}': ${row.unrecorded} was not recorded, so it accepts no more calls`, "record_failed");
    }
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

  /**
   * Track the store write of a program's call: the program ends in the store only after it settles,
   * and if it fails the program's later calls are refused (`record_failed`) and its end says so.
   */
  track(id: string, index: number, write: Promise<void>): void {
    const row = this.find(id);
    const settled = this.tracked(write).catch((e: unknown) => {
      if (row) row.unrecorded ??= `call ${index} (${e instanceof Error ? e.message : String(e)})`;
    });
    if (!row) return;
    row.writes.add(settled);
    void settled.then(() => row.writes.delete(settled));
  }

  /** Terminate a program: later calls are rejected. Idempotent; throws `program_unknown` for an unknown id. */
  release(id: string, termination: Termination = RELEASED): ProgramEntry {
    const done = this.released.get(id);
    if (done) return snapshot(done);
    const row = this.active.get(id);
    if (!row) throw new ArborError(`program '${id}' is not known to the gateway`, "program_unknown");
    this.terminate(row, this.clock.now(), termination);
    return snapshot(row);
  }

  /**
   * Terminate a program (as {@link release}) and, store-backed, resolve once its row has ended with
   * `termination`, after every write of its calls settled. Rejects when the store refuses the end.
   */
  async end(id: string, termination: Termination = RELEASED): Promise<ProgramEntry> {
    const entry = this.release(id, termination);
    await this.ended(id);
    return entry;
  }

  /**
   * Resolves once a terminated program's row has ended (at once without a store); rejects if the store refused.
   * An end the store refused before is written again first: a caller retrying the end (a retried release) is
   * what gets the program its recorded outcome.
   */
  async ended(id: string): Promise<void> {
    const row = this.find(id);
    if (row?.endRefused !== undefined && this.store) this.writeEnd(this.store, row, row.endRefused.termination, row.endRefused.at);
    await row?.ended;
  }

  /**
   * Store-backed: end every active program with `termination` (the gateway is closing), and write again the ends
   * the store refused before (each with its own termination).
   */
  endAll(termination: Termination): void {
    const store = this.store;
    if (!store) return;
    const now = this.clock.now();
    for (const row of [...this.active.values()]) this.terminate(row, now, termination);
    for (const row of [...this.ending.values()]) if (row.endRefused !== undefined) this.writeEnd(store, row, row.endRefused.termination, row.endRefused.at);
  }

  /** Resolves once every store write the table started has settled. */
  async drain(): Promise<void> {
    while (this.writing.size > 0) await Promise.allSettled([...this.writing]);
  }

  /**
   * Release every active program with no call in flight whose last activity is at least
   * `idleReleaseMs` before `now`; returns their ids (empty when idle release is off).
   */
  releaseIdle(now: number = this.clock.now()): string[] {
    const idle = this.idleReleaseMs;
    if (idle === undefined) return [];
    const expired = [...this.active.values()].filter((r) => r.inFlight === 0 && now - r.lastActivity >= idle);
    const timeout: Termination = { kind: "timeout", detail: `no call for ${idle} ms: released by the gateway` };
    for (const row of expired) this.terminate(row, now, timeout);
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

  private terminate(row: Row, at: number, termination: Termination): void {
    if (this.store) this.writeEnd(this.store, row, termination, at);
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

  /** Write a terminated program's end; one the store refuses stays in `ending` to be written again. */
  private writeEnd(store: ProgramStore, row: Row, termination: Termination, at: number): void {
    this.ending.set(row.id, row);
    row.endRefused = undefined;
    const ended = this.tracked(this.endInStore(store, row, termination, at));
    row.ended = ended;
    ended.then(
      () => {
        if (row.ended === ended) this.ending.delete(row.id);
      },
      (e: unknown) => {
        if (row.ended === ended) row.endRefused = { termination, at };
        this.onStoreError(row.id, e instanceof Error ? e : new Error(String(e)));
      },
    );
  }

  /** Whether the program is open and not terminated (no snapshot: the call path asks once per call). */
  isActive(id: string): boolean {
    return this.active.has(id);
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
    return this.active.get(id) ?? this.released.get(id) ?? this.ending.get(id);
  }

  private mustBeActive(id: string): Row {
    const row = this.active.get(id);
    if (row) return row;
    if (this.released.has(id)) throw releasedError(id);
    throw new ArborError(`program '${id}' is not open`, "program_unknown");
  }

  /**
   * End a terminated program's row once it exists, its calls in flight have finished and their
   * writes have settled: its end is then the last thing recorded for it.
   */
  private async endInStore(store: ProgramStore, row: Row, termination: Termination, at: number): Promise<void> {
    if (!(await (row.created ?? Promise.resolve(true)))) return;
    if (row.inFlight > 0) await new Promise<void>((resolve) => row.idleWaiters.push(resolve));
    await Promise.allSettled([...row.writes]);
    // A trajectory with a call missing must not pass for a whole one: the gateway failed that call.
    const t: Termination =
      row.unrecorded === undefined
        ? termination
        : {
            kind: "engine_error",
            detail: `${row.unrecorded} was not recorded; ended as ${termination.kind}${termination.detail ? ` (${termination.detail})` : ""}`,
          };
    await store.endProgram(row.id, t, at);
  }

  /** `write`, counted in {@link writing} until it settles. */
  private tracked<T>(write: Promise<T>): Promise<T> {
    this.writing.add(write);
    const forget = (): void => {
      this.writing.delete(write);
    };
    write.then(forget, forget);
    return write;
  }

  private settle(row: Row): void {
    row.phase = row.inFlight > 0 ? "reasoning" : "acting";
    row.lastActivity = this.clock.now();
    if (row.inFlight === 0) for (const wake of row.idleWaiters.splice(0)) wake();
  }
}

function releasedError(id: string): ArborError {
  return new ArborError(`program '${id}' was released; it accepts no more calls`, "program_released");
}

function snapshot(row: Row): ProgramEntry {
  const { nextIndex: _n, creating: _c, created: _cd, idleWaiters: _iw, writes: _w, unrecorded: _u, ended: _e, ...entry } = row;
  return entry;
}
