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

/** What the serving code tells the path while it serves a routed call. */
export interface ServingCall {
  readonly place: CallPlace;
  readonly route: RouteRef;
  /**
   * From here on the serving code reports `route` (and any retry's routes) to the router itself;
   * the token paths do, since they may re-route.
   */
  takeRoute(): RouteRef;
  /** The call's answer was recorded (see {@link callRecorded}); `tokens` are what the router learns. */
  recorded(tokens?: FinishedCall): void;
}

/**
 * Run one call: open it in the table, pass the pause gate, route, bind, `serve` it, then report the
 * route, fail the call in the table when it was not recorded, and tell the gate how it ended.
 */
export async function runCall<T>(path: CallPath, call: PathCall, serve: (c: ServingCall) => Promise<T>): Promise<T> {
  const { programId, start } = call;
  path.table.open(programId);
  const place: CallPlace = { programId, index: path.table.beginCall(programId), start };
  let route: RouteRef | undefined;
  let report: FinishedCall | undefined;
  let recorded = false;
  let gate: CallGate | undefined;
  try {
    const known = path.history.get(programId);
    let only: string | undefined;
    if (path.gateReady) {
      gate = await path.gateReady;
      // A paused program's call waits here; whoever ends the wait (client gone) aborts the signal.
      const held = call.holdSignal?.();
      try {
        only = await gate.beforeCall(programId, known?.length ?? call.estimateTokens(), held?.signal, path.router.boundBackend(programId));
      } catch (e) {
        gate = undefined; // a rejected beforeCall needs no afterCall/onCallAbort
        throw e;
      } finally {
        held?.detach();
      }
    }
    const req: RoutingRequest = { programId, ...(known ? { promptTokens: known } : {}), ...(only !== undefined ? { only } : {}) };
    const first: RouteRef = call.route ? call.route(req) : path.router.route(req);
    route = first;
    call.onRouted?.(first);
    path.table.bind(programId, first.backend);
    return await serve({
      place,
      route: first,
      takeRoute: () => {
        route = undefined;
        return first;
      },
      recorded: (tokens) => {
        recorded = true;
        report = tokens;
      },
    });
  } finally {
    if (route !== undefined) path.router.onFinished(route.id, recorded && report ? { ...report, ok: true } : { outputTokens: 0, ok: false });
    if (!recorded) path.table.failCall(programId, place.index);
    if (gate) {
      const context = path.history.get(programId);
      if (recorded && context) gate.afterCall(programId, context.length);
      else gate.onCallAbort(programId);
    }
  }
}

/** A call's tokens were recorded: the table ends the call and the program's history is its context. */
export function callRecorded(path: Pick<CallPath, "table" | "history">, programId: string, promptTokenIds: readonly number[], outputTokenIds: readonly number[]): void {
  path.table.endCall(programId, promptTokenIds.length + outputTokenIds.length);
  path.history.set(programId, [...promptTokenIds, ...outputTokenIds]);
}

/** A released program: its history, router binding and gate state go (the table keeps a tombstone). */
export function programForgotten(path: CallPath, programId: string): void {
  path.history.delete(programId);
  path.router.releaseProgram(programId);
  void path.gateReady?.then((g) => g.onRelease(programId), () => undefined);
}
