// ThunderAgent's state-aware pause/restore controller (TECHNIQUES §B1, §A2) as an I/O-free state
// machine: the proxy reports call starts/ends and releases, `tick` runs every Δt, and the
// decisions come back as actions for the HTTP gateway or the simulator to carry out.
import type { Clock, Timer } from "../../core/clock.js";
import { ArborError, CapacityError } from "../../core/errors.js";
import { resolvePauseConfig, type PauseConfig } from "./pause-config.js";
import { planRestore, type RestoreCandidate, type RestoreGroup } from "./restore-packing.js";

export type PausingPhase = "reasoning" | "acting";
export type PausingState = "active" | "paused" | "terminated";

/** One row of the controller's program table (a snapshot copy when returned). */
export interface PausingProgram {
  id: string;
  /** Context tokens c: last prompt + output tokens (the KV footprint). */
  contextTokens: number;
  /** "reasoning" while a call is in flight or held, "acting" between calls. */
  phase: PausingPhase;
  /** When the acting phase began (clock ms); null while reasoning. */
  actingSince: number | null;
  state: PausingState;
  /** Backend it is bound to; null while paused (see originBackend) or before its first placement. */
  backend: string | null;
  /** Backend it was paused from (null for a new program never placed). */
  originBackend: string | null;
  /** Calls at a backend now. */
  inFlight: number;
  /** Calls held at the proxy until a restore/admit action lets them go. */
  waitingCalls: number;
  /** When the oldest held call began waiting (clock ms); null when none waits. */
  waitingSince: number | null;
  /** Mid-generation program chosen for pausing: it is paused as soon as its calls return. */
  markedForPause: boolean;
  /** Calls that reached a backend so far (0 = new program). */
  callsStarted: number;
}

export interface PausingBackend {
  name: string;
  /** KV capacity C in tokens. */
  capacity: number;
}

export type PauseActionKind = "pause" | "restore" | "admit";

/**
 * A decision for the proxy. pause: stop the program on `backend` (engine pause where the backend
 * has one, else hold its next call at the proxy). restore: a paused program is bound to `backend`
 * (maybe not its origin). admit: a new program's first call is placed on `backend`. For restore and
 * admit, `releasedCalls` held calls may now go to `backend`.
 */
export interface PauseAction {
  kind: PauseActionKind;
  programId: string;
  backend: string;
  reason: "over-capacity" | "marked-call-returned" | "under-capacity" | "force-resume";
  releasedCalls: number;
}

export type CallStartDecision = { kind: "go"; backend: string } | { kind: "wait" };

export interface PauseCounters {
  pauses: number;
  /** Programs marked mid-generation (each becomes a pause when its call returns). */
  marks: number;
  restores: number;
  admits: number;
  forceResumes: number;
}

export interface BackendUsage {
  backend: string;
  capacity: number;
  /** Σ c of active programs + buffer per program, undecayed. */
  rawUsage: number;
  /** Σ c with acting programs decayed by 2^−t, + buffer per program. */
  decayedUsage: number;
  /** The usage the pause check compares with λmax·C (raw or decayed per decayScope), minus marked programs' share. */
  projectedUsage: number;
  activePrograms: number;
  markedPrograms: number;
}

export interface PauseControllerOptions {
  clock: Clock;
  backends: readonly PausingBackend[];
  config?: Partial<PauseConfig>;
}

interface Row extends PausingProgram {
  /** Position when it entered the waiting queue (FIFO tie-break). */
  queueSeq: number;
}

const snapshot = (r: Row): PausingProgram => {
  const { queueSeq: _q, ...rest } = r;
  return { ...rest };
};

/** The controller. One instance serves all backends (one global waiting queue). */
export class PauseController {
  readonly config: PauseConfig;
  private readonly clock: Clock;
  private readonly capacity = new Map<string, number>();
  /** Backends out of rotation (see setBackendUp): nothing is placed there. */
  private readonly down = new Set<string>();
  private readonly programs = new Map<string, Row>();
  /** The single global waiting queue: ids of paused programs, in pause order. */
  private readonly queue = new Set<string>();
  private seq = 0;
  private lastTick = -Infinity;
  private timer: Timer | null = null;
  private readonly stats: PauseCounters = { pauses: 0, marks: 0, restores: 0, admits: 0, forceResumes: 0 };

  constructor(opts: PauseControllerOptions) {
    this.config = resolvePauseConfig(opts.config);
    this.clock = opts.clock;
    if (opts.backends.length === 0) throw new ArborError("pausing.backends: at least one backend is needed", "config");
    for (const b of opts.backends) this.setCapacity(b.name, b.capacity);
  }

  /** Add a backend or change its capacity C (e.g. once learned from vLLM's cache_config_info). */
  setCapacity(backend: string, capacity: number): void {
    if (typeof backend !== "string" || backend.length === 0) {
      throw new ArborError(`pausing.backends: name must be a non-empty string, got ${JSON.stringify(backend)}`, "config");
    }
    if (!Number.isFinite(capacity) || capacity <= 0) {
      throw new ArborError(`pausing.backends[${backend}].capacity: must be a finite number > 0, got ${capacity}`, "config");
    }
    this.capacity.set(backend, capacity);
  }

  /**
   * A backend left rotation (`up` false: failed health checks or calls) or came back. While it is out,
   * nothing is admitted, restored or force-resumed there (unless no backend is up: then a new program's
   * call goes where the router picked and fails at routing, rather than waiting in the queue).
   * Its KV is gone with it: its idle programs are paused now and its busy ones as their calls end (the
   * gateway aborts them), with no pause action (there is no engine to pause) and no origin, and a
   * restore pass runs at once (returned: its restores usually place them on the most free backend, so
   * their next call need not wait for a tick); a paused program that came from it forgets that origin.
   */
  setBackendUp(backend: string, up: boolean): PauseAction[] {
    this.requireBackend(backend);
    if (up) {
      this.down.delete(backend);
      return [];
    }
    this.down.add(backend);
    for (const r of this.programs.values()) {
      if (r.originBackend === backend) r.originBackend = null;
      if (r.state !== "active" || r.backend !== backend) continue;
      if (r.inFlight > 0) r.markedForPause = true;
      else this.pause(r);
    }
    return this.restore(this.clock.now());
  }

  /** False while the backend is out of rotation (setBackendUp). */
  isUp(backend: string): boolean {
    return !this.down.has(backend);
  }

  /** Whether a least-used pick may choose the backend: one in rotation, or any when none is (the call then fails at routing). */
  placeable(backend: string): boolean {
    return !this.down.has(backend) || this.down.size === this.capacity.size;
  }

  /**
   * A call of `programId` arrives; `backend` is the router's pick, used only to place a new
   * program (an active program stays on its bound backend; the returned backend is the one to use).
   * "wait": hold the call until a restore/admit action for this program releases it.
   */
  onCallStart(programId: string, backend: string, promptTokens: number): CallStartDecision {
    checkTokens("promptTokens", promptTokens);
    this.requireBackend(backend);
    const now = this.clock.now();
    let row = this.programs.get(programId);
    if (!row) {
      if (this.programs.size >= this.config.maxPrograms) throw new CapacityError("pausing program table", this.config.maxPrograms);
      row = newRow(programId);
      this.programs.set(programId, row);
    }
    if (row.state === "terminated") {
      throw new ArborError(`program ${programId} was released; it takes no more calls`, "program_released");
    }
    row.contextTokens = promptTokens;

    if (row.state === "paused") return this.hold(row, now);
    if (row.backend === null) {
      // New program, as `_select_backend_for_new_program`: queue behind anyone already waiting (fairness);
      // else the router's pick if it has room, else the least used backend with room, else queue.
      const target = this.queue.size > 0 ? null : this.placeNew(backend, promptTokens);
      if (target === null) {
        row.state = "paused";
        this.enqueue(row);
        return this.hold(row, now);
      }
      row.backend = target;
      this.stats.admits++;
    }
    row.inFlight++;
    row.callsStarted++;
    row.phase = "reasoning";
    row.actingSince = null;
    this.leaveIfDown(row);
    return { kind: "go", backend: row.backend };
  }

  /**
   * A call returned with `totalTokens` (prompt + output): the program's new footprint. When its
   * last in-flight call returns it turns acting; a marked program is paused now (returned action).
   */
  onCallEnd(programId: string, totalTokens: number): PauseAction[] {
    checkTokens("totalTokens", totalTokens);
    const row = this.inFlightRow(programId);
    if (!row) return [];
    row.contextTokens = totalTokens;
    return this.finishCall(row);
  }

  /** A call failed without a usable result: the footprint is left as it was. */
  onCallAbort(programId: string): PauseAction[] {
    const row = this.inFlightRow(programId);
    return row ? this.finishCall(row) : [];
  }

  /**
   * A held call gave up before a restore/admit released it (client went away, proxy bound hit).
   * A program that never reached a backend and has nothing left waiting is forgotten, so a dead
   * first call does not later claim capacity. Unknown ids and programs with nothing held are ignored.
   */
  onHeldCallAbort(programId: string): void {
    const row = this.programs.get(programId);
    if (!row || row.waitingCalls <= 0) return;
    row.waitingCalls--;
    if (row.waitingCalls > 0) return;
    row.waitingSince = null;
    if (row.callsStarted === 0 && row.state === "paused") {
      this.queue.delete(programId);
      this.programs.delete(programId);
      return;
    }
    if (row.inFlight === 0) {
      row.phase = "acting";
      row.actingSince = this.clock.now();
    }
  }

  /**
   * The program ended. Returns the number of its held calls, which the proxy must now fail
   * (ThunderAgent's `release_program` likewise wakes them). Unknown ids return 0.
   */
  onRelease(programId: string): number {
    const row = this.programs.get(programId);
    if (!row || row.state === "terminated") return 0;
    const held = row.waitingCalls;
    this.queue.delete(programId);
    row.state = "terminated";
    row.markedForPause = false;
    row.waitingCalls = 0;
    row.waitingSince = null;
    // ThunderAgent deletes the program at release; no late call can revive it here either.
    this.programs.delete(programId);
    return held;
  }

  /**
   * One scheduling pass, in ThunderAgent's `_scheduled_check` order: force-resume calls held past
   * the bound, restore from the global queue into backends below λmin·C, then pause on backends
   * above λmax·C. Restoring before pausing means a program paused in this pass is not restored
   * in the same pass.
   */
  tick(now: number = this.clock.now()): PauseAction[] {
    if (now < this.lastTick) throw new ArborError(`pausing.tick: time went backwards (${now} < ${this.lastTick})`, "internal");
    this.lastTick = now;
    return [...this.forceResume(now), ...this.restore(now), ...this.pausePass(now)];
  }

  /** Run `tick` every intervalMs through the Clock and hand each non-empty action list to `onActions`. */
  start(onActions: (actions: PauseAction[]) => void): void {
    if (this.timer) throw new ArborError("pausing: controller already started", "internal");
    const loop = (): void => {
      this.timer = this.clock.setTimer(this.config.intervalMs, () => {
        loop();
        const actions = this.tick();
        if (actions.length > 0) onActions(actions);
      });
    };
    loop();
  }

  /** Stop the periodic tick (idempotent). */
  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /** A program's row, or undefined (released programs are forgotten). */
  get(programId: string): PausingProgram | undefined {
    const row = this.programs.get(programId);
    return row ? snapshot(row) : undefined;
  }

  /** All tracked programs. */
  list(): PausingProgram[] {
    return [...this.programs.values()].map(snapshot);
  }

  /** Ids in the global waiting queue, in pause order. */
  waitingQueue(): string[] {
    return [...this.queue];
  }

  counters(): PauseCounters {
    return { ...this.stats };
  }

  /** Per-backend usage for metrics, at `now`. */
  usage(now: number = this.clock.now()): BackendUsage[] {
    return [...this.capacity.entries()].map(([backend, capacity]) => {
      const rows = this.activeOn(backend);
      const buffer = rows.length * this.config.bufferPerProgram;
      const raw = rows.reduce((s, r) => s + r.contextTokens, 0) + buffer;
      const decayed = rows.reduce((s, r) => s + this.decayed(r, now), 0) + buffer;
      const marked = rows.filter((r) => r.markedForPause);
      return {
        backend,
        capacity,
        rawUsage: raw,
        decayedUsage: decayed,
        projectedUsage: this.pauseUsage(backend, now),
        activePrograms: rows.length,
        markedPrograms: marked.length,
      };
    });
  }

  // ---- internals ----

  private hold(row: Row, now: number): CallStartDecision {
    // As `update_program_before_request`: a program with a held call counts as reasoning, which gives
    // it the highest restore priority.
    row.waitingCalls++;
    row.waitingSince ??= now;
    row.phase = "reasoning";
    row.actingSince = null;
    return { kind: "wait" };
  }

  private finishCall(row: Row): PauseAction[] {
    row.inFlight--;
    if (row.inFlight > 0) return [];
    row.phase = "acting";
    row.actingSince = this.clock.now();
    if (!row.markedForPause) return [];
    // `update_program_after_request` → `_clear_mark_and_pause`.
    const backend = row.backend as string;
    this.pause(row);
    if (this.down.has(backend)) return this.restore(this.clock.now());
    return [{ kind: "pause", programId: row.id, backend, reason: "marked-call-returned", releasedCalls: 0 }];
  }

  /** The row of a call that ends; undefined when the program was released meanwhile (its late end is ignored). */
  private inFlightRow(programId: string): Row | undefined {
    const row = this.programs.get(programId);
    if (!row) return undefined;
    if (row.inFlight <= 0) throw new ArborError(`pausing: program ${programId} has no call in flight`, "invalid_request");
    return row;
  }

  private requireBackend(backend: string): void {
    if (!this.capacity.has(backend)) throw new ArborError(`pausing: unknown backend ${JSON.stringify(backend)}`, "invalid_request");
  }

  private enqueue(row: Row): void {
    row.queueSeq = this.seq++;
    this.queue.add(row.id);
  }

  private pause(row: Row): void {
    row.markedForPause = false;
    row.originBackend = row.backend !== null && this.down.has(row.backend) ? null : row.backend;
    row.backend = null;
    row.state = "paused";
    this.enqueue(row);
    this.stats.pauses++;
  }

  /**
   * Bound to a backend out of rotation (only when none is in): marked, so that it is paused when its
   * calls end (they fail at routing) instead of staying bound there.
   */
  private leaveIfDown(row: Row): void {
    if (row.inFlight > 0 && row.backend !== null && this.down.has(row.backend)) row.markedForPause = true;
  }

  private activeOn(backend: string): Row[] {
    const out: Row[] = [];
    for (const r of this.programs.values()) if (r.state === "active" && r.backend === backend) out.push(r);
    return out;
  }

  /** c · 2^−t for an acting program (t in decay units since acting began), c otherwise. */
  private decayed(r: Row, now: number): number {
    if (r.phase !== "acting" || r.actingSince === null) return r.contextTokens;
    const t = Math.max(0, now - r.actingSince) / this.config.decayUnitMs;
    return r.contextTokens * Math.pow(2, -t);
  }

  private weight(r: Row, now: number, forRestore: boolean): number {
    const scope = this.config.decayScope;
    return scope === "usage" || (scope === "restore" && forRestore) ? this.decayed(r, now) : r.contextTokens;
  }

  private usageOf(backend: string, now: number, forRestore: boolean): number {
    const rows = this.activeOn(backend);
    return rows.reduce((s, r) => s + this.weight(r, now, forRestore), 0) + rows.length * this.config.bufferPerProgram;
  }

  /** Usage for the pause check, net of marked programs (ThunderAgent's `future_paused_tokens`). */
  private pauseUsage(backend: string, now: number): number {
    let u = this.usageOf(backend, now, false);
    for (const r of this.activeOn(backend)) if (r.markedForPause) u -= this.weight(r, now, false);
    return u;
  }

  private placeNew(preferred: string, tokens: number): string | null {
    const now = this.clock.now();
    // None in rotation: the call goes on and fails at routing (a clear 503), rather than queueing.
    if (this.down.size === this.capacity.size) return preferred;
    const need = tokens + this.config.bufferPerProgram;
    const fits = (b: string): boolean => this.usageOf(b, now, true) + need <= this.config.lambdaMax * (this.capacity.get(b) as number);
    if (!this.down.has(preferred) && fits(preferred)) return preferred;
    let best: string | null = null;
    let bestUsage = Infinity;
    for (const b of this.capacity.keys()) {
      if (this.down.has(b)) continue;
      const u = this.usageOf(b, now, true);
      if (fits(b) && u < bestUsage) {
        best = b;
        bestUsage = u;
      }
    }
    return best;
  }

  private bind(row: Row, backend: string, kind: "restore" | "admit", reason: PauseAction["reason"]): PauseAction {
    const released = row.waitingCalls;
    this.queue.delete(row.id);
    row.state = "active";
    row.backend = backend;
    row.originBackend = null;
    row.waitingCalls = 0;
    row.waitingSince = null;
    if (released > 0) {
      row.inFlight += released;
      row.callsStarted += released;
      row.phase = "reasoning";
      row.actingSince = null;
    }
    this.leaveIfDown(row);
    if (kind === "admit") this.stats.admits++;
    else this.stats.restores++;
    return { kind, programId: row.id, backend, reason, releasedCalls: released };
  }

  private forceResume(now: number): PauseAction[] {
    const out: PauseAction[] = [];
    for (const id of [...this.queue]) {
      const row = this.programs.get(id) as Row;
      if (row.waitingSince === null || now - row.waitingSince < this.config.forceResumeMs) continue;
      // `_wait_for_resume` timeout: back to the origin backend regardless of capacity; a new
      // program goes to the least used backend.
      const target = row.originBackend ?? this.leastUsed(now);
      out.push(this.bind(row, target, row.callsStarted === 0 ? "admit" : "restore", "force-resume"));
      this.stats.forceResumes++;
    }
    return out;
  }

  /** The backend in rotation with the lowest usage / C; with none in rotation, the lowest of all. */
  private leastUsed(now: number): string {
    let best = "";
    let bestRatio = Infinity;
    for (const [b, cap] of this.capacity) {
      if (!this.placeable(b)) continue;
      const ratio = this.usageOf(b, now, false) / cap;
      if (ratio < bestRatio) {
        best = b;
        bestRatio = ratio;
      }
    }
    return best;
  }

  private restore(now: number): PauseAction[] {
    if (this.queue.size === 0) return [];
    const bins = [];
    for (const [backend, cap] of this.capacity) {
      if (this.down.has(backend)) continue;
      const u = this.usageOf(backend, now, true);
      if (u < this.config.lambdaMin * cap) bins.push({ backend, free: this.config.lambdaMax * cap - u });
    }
    const candidates: RestoreCandidate[] = [...this.queue].map((id) => {
      const r = this.programs.get(id) as Row;
      const group: RestoreGroup = r.callsStarted === 0 ? "new" : r.waitingCalls > 0 ? "reasoning" : "acting";
      return { id, tokens: r.contextTokens, group, order: r.queueSeq, origin: r.originBackend };
    });
    return planRestore(candidates, bins, this.config.bufferPerProgram, this.config.placement).map((p) => {
      const row = this.programs.get(p.id) as Row;
      return this.bind(row, p.backend, row.callsStarted === 0 ? "admit" : "restore", "under-capacity");
    });
  }

  /**
   * `_pause_until_safe`, per backend: while usage (net of marked programs) > λmax·C, pause the
   * program with the highest S_pause = 1/c + 𝟙[Acting] — acting programs smallest-first, then
   * reasoning ones smallest-first; a reasoning program is only marked (paused when its call returns).
   */
  private pausePass(now: number): PauseAction[] {
    const out: PauseAction[] = [];
    for (const [backend, cap] of this.capacity) {
      const limit = this.config.lambdaMax * cap;
      let usage = this.pauseUsage(backend, now);
      if (usage <= limit) continue;
      const order = this.activeOn(backend)
        .filter((r) => !r.markedForPause)
        .sort(
          (a, b) =>
            Number(b.phase === "acting") - Number(a.phase === "acting") ||
            a.contextTokens - b.contextTokens ||
            (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
        );
      for (const r of order) {
        if (usage <= limit) break;
        usage -= this.weight(r, now, false) + this.config.bufferPerProgram;
        if (r.inFlight > 0) {
          r.markedForPause = true;
          this.stats.marks++;
          // The buffer of a marked program is still counted by pauseUsage; keep the running figure honest.
          usage += this.config.bufferPerProgram;
        } else {
          this.pause(r);
          out.push({ kind: "pause", programId: r.id, backend, reason: "over-capacity", releasedCalls: 0 });
        }
      }
    }
    return out;
  }
}

function newRow(id: string): Row {
  return {
    id,
    contextTokens: 0,
    phase: "acting",
    actingSince: null,
    state: "active",
    backend: null,
    originBackend: null,
    inFlight: 0,
    waitingCalls: 0,
    waitingSince: null,
    markedForPause: false,
    callsStarted: 0,
    queueSeq: 0,
  };
}

function checkTokens(field: string, v: number): void {
  if (!Number.isInteger(v) || v < 0) throw new ArborError(`pausing: ${field} must be an integer >= 0, got ${v}`, "invalid_request");
}
