// The gateway's call path without I/O: what happens around every inference call whatever serves
// it — the program table opens the call, the pause gate may hold it and says where it must go, the
// router places it, and when it ends the router, the table and the gate are told how it went — and
// what a recorded call and a released program change. The HTTP gateway (serve-call.ts,
// record-call.ts, program-release.ts) and the simulator (src/sim/gateway-sim.ts) both run calls
// through here, over the same production classes, so the simulator measures the served path.
import type { CallGate } from "./pausing/call-gate.js";
import type { ProgramTable } from "./program-table.js";
import type { FinishedCall, PluginRouter, RouteDecision } from "./routing/plugin-router.js";
import type { RoutingRequest } from "./routing/types.js";

/** The production pieces a call goes through (GatewayContext has them all). */
export interface CallPath {
  router: PluginRouter;
  table: ProgramTable;
  /** Each program's last context (prompt + output ids): what its next call's routing matches. */
  history: Map<string, number[]>;
  /** The pause gate, when pausing is enabled. */
  gateReady: Promise<CallGate> | undefined;
}

/** A routing decision still owed a router.onFinished report. */
export interface RouteRef {
  id: number;
  backend: string;
}

/** Where a call stands: its program, its index there and when the gateway took it. */
export interface CallPlace {
  programId: string;
  index: number;
  start: number;
}

/** One call as the path sees it. */
export interface PathCall {
  programId: string;
  /** Clock time the gateway took the call. */
  start: number;
  /** Prompt-size estimate for a program with no token history yet (the gate's first placement). */
  estimateTokens(): number;
  /** Route with this (the HTTP gateway turns "no backend" into a 503); default the router's own route. */
  route?(req: RoutingRequest): RouteDecision;
  /** A signal that ends a wait at the gate (the client went away), and how to stop watching it. */
  holdSignal?(): { signal: AbortSignal; detach(): void };
  /** Told once the call is routed (request metrics). */
  onRouted?(route: RouteRef): void;
}

/**
 * A call that passed the gate and was routed: the serving code tells it what happened, then ends
 * it exactly once — in the same turn as its own last step, so that the table, router and gate
 * are settled before the client can see the answer and send its next call.
 */
export class OpenCall {
  private routeOwed: RouteRef | undefined;
  private report: FinishedCall | undefined;
  private wasRecorded = false;
  private ended = false;

  constructor(
    private readonly path: CallPath,
    readonly place: CallPlace,
    /** The route the call took (undefined only inside beginCall, for a call that failed before routing). */
    private readonly first: RouteRef | undefined,
    private readonly gate: CallGate | undefined,
    /** The call opened its program: an unrecorded end forgets the program again (ProgramTable.discardUnused). */
    private readonly opensProgram = false,
  ) {
    this.routeOwed = first;
  }

  /** Where the call goes. */
  get route(): RouteRef {
    return this.first as RouteRef;
  }

  /**
   * From here on the serving code reports the route (and any retry's routes) to the router itself;
   * the token paths do, since they may re-route.
   */
  takeRoute(): RouteRef {
    this.routeOwed = undefined;
    return this.route;
  }

  /** The call's answer was recorded (see {@link callRecorded}); `tokens` are what the router learns. */
  recorded(tokens?: Omit<FinishedCall, "ok">): void {
    this.wasRecorded = true;
    this.report = tokens;
  }

  /** Report the route, fail the call in the table unless recorded, and tell the gate how it ended. Idempotent. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    const { path, place, gate } = this;
    if (this.routeOwed !== undefined) {
      path.router.onFinished(this.routeOwed.id, this.wasRecorded && this.report ? { ...this.report, ok: true } : { outputTokens: 0, ok: false });
    }
    if (!this.wasRecorded) path.table.failCall(place.programId, place.index);
    if (gate) {
      const context = path.history.get(place.programId);
      if (this.wasRecorded && context) gate.afterCall(place.programId, context.length);
      else gate.onCallAbort(place.programId);
    }
    // A refused or failed first call leaves nothing behind: invalid requests with fresh ids cannot fill the table.
    if (!this.wasRecorded && this.opensProgram && path.table.discardUnused(place.programId)) programForgotten(path, place.programId);
  }
}

/**
 * Start one call: open it in the table, pass the pause gate (which may hold it), route where the
 * gate says and bind the program there. A call that fails on the way is ended (unrecorded) before
 * the error is thrown; otherwise the caller serves it and must {@link OpenCall.end} it.
 */
export async function beginCall(path: CallPath, call: PathCall): Promise<OpenCall> {
  const { programId, start } = call;
  const opensProgram = path.table.get(programId) === undefined;
  // Store-backed, an unknown or ended program is refused here, before anything reaches an engine.
  path.table.admit(programId);
  const place: CallPlace = { programId, index: path.table.beginCall(programId), start };
  let gate: CallGate | undefined;
  let open: OpenCall | undefined;
  try {
    const known = path.history.get(programId);
    let only: string | undefined;
    if (path.gateReady) {
      const g = await path.gateReady;
      // A paused program's call waits here; whoever ends the wait (client gone) aborts the signal.
      const held = call.holdSignal?.();
      try {
        // A rejected beforeCall needs no afterCall/onCallAbort: the gate is only kept once it resolves.
        only = await g.beforeCall(programId, known?.length ?? call.estimateTokens(), held?.signal, path.router.boundBackend(programId));
        gate = g;
      } finally {
        held?.detach();
      }
    }
    const req: RoutingRequest = { programId, ...(known ? { promptTokens: known } : {}), ...(only !== undefined ? { only } : {}) };
    const route: RouteRef = call.route ? call.route(req) : path.router.route(req);
    open = new OpenCall(path, place, route, gate, opensProgram);
    call.onRouted?.(route);
    path.table.bind(programId, route.backend);
    return open;
  } catch (e) {
    // Failed before serving: ended unrecorded (its route, if any, reported failed).
    (open ?? new OpenCall(path, place, undefined, gate, opensProgram)).end();
    throw e;
  }
}

/** Run one call through {@link beginCall}, `serve` and {@link OpenCall.end} (callers without an answer race to settle). */
export async function runCall<T>(path: CallPath, call: PathCall, serve: (c: OpenCall) => Promise<T>): Promise<T> {
  const open = await beginCall(path, call);
  try {
    return await serve(open);
  } finally {
    open.end();
  }
}

/**
 * A call's tokens were recorded: the table ends the call and the program's history is its context. A program
 * released while the call ran keeps none: its release has forgotten it already, and nothing would again.
 */
export function callRecorded(path: Pick<CallPath, "table" | "history">, programId: string, promptTokenIds: readonly number[], outputTokenIds: readonly number[]): void {
  path.table.endCall(programId, promptTokenIds.length + outputTokenIds.length);
  if (path.table.isActive(programId)) path.history.set(programId, promptTokenIds.concat(outputTokenIds));
}

/** A released program: its history, router binding and gate state go (the table keeps a tombstone). */
export function programForgotten(path: CallPath, programId: string): void {
  path.history.delete(programId);
  path.router.releaseProgram(programId);
  void path.gateReady?.then((g) => g.onRelease(programId), () => undefined);
}
