// Which backends are in rotation, as an I/O-free state machine driven by the caller's clock
// readings: a failed health check or a failed call takes a backend out; a passing health check
// brings it back. It also says when each backend's next check is due (often while out of
// rotation, at the configured interval while in it).
import { ArborError } from "../../core/errors.js";

export interface HealthTrackerOptions {
  backends: readonly string[];
  /** Check backends in rotation every this many ms; undefined = only check backends out of rotation. */
  intervalMs?: number;
  /** Check a backend out of rotation every this many ms (default 1000). */
  recheckMs?: number;
}

/** A backend's rotation changed. */
export interface HealthTransition {
  backend: string;
  up: boolean;
  /** Why it went down (the failed check's or call's error message); undefined when it came back. */
  cause?: string;
}

interface State {
  up: boolean;
  checking: boolean;
  nextAt: number | undefined;
  cause: string | undefined;
}

/** Rotation state of a fixed set of backends. */
export class HealthTracker {
  private readonly states = new Map<string, State>();
  private readonly intervalMs: number | undefined;
  private readonly recheckMs: number;

  constructor(opts: HealthTrackerOptions, now: number) {
    const positive = (v: number | undefined, field: string): void => {
      if (v !== undefined && !(Number.isInteger(v) && v >= 1)) throw new ArborError(`gateway.health.${field}: must be an integer >= 1, got ${v}`, "config");
    };
    positive(opts.intervalMs, "intervalMs");
    positive(opts.recheckMs, "recheckMs");
    this.intervalMs = opts.intervalMs;
    this.recheckMs = opts.recheckMs ?? 1000;
    for (const b of opts.backends) {
      this.states.set(b, { up: true, checking: false, nextAt: this.intervalMs === undefined ? undefined : now + this.intervalMs, cause: undefined });
    }
  }

  /** Whether `backend` is in rotation. */
  isUp(backend: string): boolean {
    return this.state(backend).up;
  }

  /** Why `backend` is out of rotation (undefined while in it). */
  causeOf(backend: string): string | undefined {
    return this.state(backend).cause;
  }

  /** Backends whose check is due at `now` (they count as being checked until {@link HealthTracker.onCheck}). */
  due(now: number): string[] {
    const out: string[] = [];
    for (const [name, s] of this.states) {
      if (!s.checking && s.nextAt !== undefined && s.nextAt <= now) {
        s.checking = true;
        out.push(name);
      }
    }
    return out;
  }

  /** Milliseconds from `now` until the next check is due; undefined when none is scheduled. */
  nextDueIn(now: number): number | undefined {
    let next: number | undefined;
    for (const s of this.states.values()) {
      if (s.checking || s.nextAt === undefined) continue;
      next = next === undefined ? s.nextAt : Math.min(next, s.nextAt);
    }
    return next === undefined ? undefined : Math.max(0, next - now);
  }

  /** A health check ended (`error` = its failure message). Returns the transition it caused, if any. */
  onCheck(backend: string, now: number, error?: string): HealthTransition | undefined {
    const s = this.state(backend);
    s.checking = false;
    if (error === undefined) {
      s.nextAt = this.intervalMs === undefined ? undefined : now + this.intervalMs;
      if (s.up) return undefined;
      s.up = true;
      s.cause = undefined;
      return { backend, up: true };
    }
    return this.down(s, backend, now, error);
  }

  /**
   * A call to `backend` failed at the transport level (unreachable, reset, 5xx). The last backend
   * in rotation stays in: with nowhere else to go, refusing every call helps no one; its health
   * checks still take it out if it is really gone.
   */
  onCallFailed(backend: string, now: number, cause: string): HealthTransition | undefined {
    const s = this.state(backend);
    if (s.up && [...this.states.values()].filter((x) => x.up).length === 1) {
      if (!s.checking) s.nextAt = Math.min(s.nextAt ?? Infinity, now + this.recheckMs);
      return undefined;
    }
    return this.down(s, backend, now, cause);
  }

  private down(s: State, backend: string, now: number, cause: string): HealthTransition | undefined {
    s.cause = cause;
    // A check already in flight re-arms the schedule when it ends.
    if (!s.checking) s.nextAt = now + this.recheckMs;
    if (!s.up) return undefined;
    s.up = false;
    return { backend, up: false, cause };
  }

  private state(backend: string): State {
    const s = this.states.get(backend);
    if (!s) throw new ArborError(`health: unknown backend '${backend}'`, "config");
    return s;
  }
}
