// The router: tracks in-flight calls per backend and asks a RoutingPolicy plugin where the next
// call goes. I/O-free, so the simulator drives the same code as the server.
import { ArborError } from "../core/errors.js";

export interface RoutingCandidate {
  name: string;
  /** Calls the gateway currently has outstanding at this backend. */
  inFlight: number;
}

/** A routing plugin: picks one candidate's name for a call of `programId`. */
export interface RoutingPolicy {
  readonly name: string;
  pick(candidates: readonly RoutingCandidate[], programId: string): string;
}

/** In-flight bookkeeping around a {@link RoutingPolicy}. */
export class Router {
  private readonly inFlight = new Map<string, number>();

  constructor(
    backendNames: readonly string[],
    private readonly policy: RoutingPolicy,
  ) {
    if (backendNames.length === 0) throw new ArborError("gateway: needs at least one backend", "config");
    for (const n of backendNames) {
      if (this.inFlight.has(n)) throw new ArborError(`gateway: backend name '${n}' is used twice`, "config");
      this.inFlight.set(n, 0);
    }
  }

  /** Choose a backend for one call and count it in flight until {@link Router.done}. */
  acquire(programId: string): string {
    const candidates = [...this.inFlight].map(([name, inFlight]) => ({ name, inFlight }));
    const name = this.policy.pick(candidates, programId);
    const n = this.inFlight.get(name);
    if (n === undefined) {
      throw new ArborError(`routing policy '${this.policy.name}' picked unknown backend '${name}'`, "routing");
    }
    this.inFlight.set(name, n + 1);
    return name;
  }

  /** The call acquired on `name` finished (successfully or not). */
  done(name: string): void {
    const n = this.inFlight.get(name);
    if (n === undefined || n === 0) throw new ArborError(`router: no call in flight on '${name}'`, "routing");
    this.inFlight.set(name, n - 1);
  }

  /** Current in-flight counts, in backend order. */
  loads(): RoutingCandidate[] {
    return [...this.inFlight].map(([name, inFlight]) => ({ name, inFlight }));
  }
}
