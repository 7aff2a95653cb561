// Test helpers for routing plugins: hand-built backend views and score contexts.
import { promptLengthOf, type BackendView, type RoutingRequest, type ScoreContext } from "../gateway/routing/types.js";

/** A backend view with idle defaults, overridden by `v`. */
export function view(name: string, v: Partial<BackendView> = {}): BackendView {
  return { name, healthy: true, inFlight: 0, queued: 0, programs: 0, activeTokens: 0, activePrefillTokens: 0, treeTokens: 0, ...v };
}

/** A score context over `backends` with the given per-backend prefix matches and binding. */
export function context(
  request: RoutingRequest,
  backends: BackendView[],
  matched: number[] = backends.map(() => 0),
  boundBackend?: string,
): ScoreContext {
  return { request, backends, boundBackend, promptLength: promptLengthOf(request), prefixMatch: () => matched };
}

/** Name of the highest-scoring backend (first on ties). */
export function argmax(backends: readonly BackendView[], scores: readonly number[]): string {
  let best = 0;
  scores.forEach((s, i) => {
    if (s > (scores[best] as number)) best = i;
  });
  return (backends[best] as BackendView).name;
}
