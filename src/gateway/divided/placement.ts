// Where a divided rollout's next chunk goes (Seer §B5): the backend with the most free KV,
// kvCapacityTokens · (1 − kvUsage), from a fresh scrape of each backend's metrics, ranked by the
// shared rule of divided-plan.ts.
import type { BackendMetrics } from "../../backends/backend.js";
import { rankByFreeKv as rankFree } from "./divided-plan.js";

/** One backend as the placement sees it: its scrape, or why there is none. */
export interface PlacementCandidate {
  name: string;
  /** Null when the scrape failed (`error` says why): the backend is not used for this chunk. */
  metrics: BackendMetrics | null;
  error?: string;
}

/** A candidate's score in the placement log. */
export interface CandidateScore {
  name: string;
  /** Free KV tokens; null when the backend does not report capacity or usage (it then ranks last). */
  freeKvTokens: number | null;
  /** Why the backend could not take the chunk (scrape failed, or it failed this chunk already). */
  unavailable?: string;
}

/**
 * Rank the candidates, best first: known free KV before unknown, more free KV first, ties (and
 * unknowns) in the configured order so the same loads always give the same choice. Unavailable
 * candidates are left out of the ranking but kept in `scores` with their reason.
 */
export function rankByFreeKv(candidates: readonly PlacementCandidate[]): { ranked: string[]; scores: CandidateScore[] } {
  const scores: CandidateScore[] = candidates.map((c) =>
    c.metrics === null ? { name: c.name, freeKvTokens: null, unavailable: c.error ?? "no metrics" } : { name: c.name, freeKvTokens: freeKv(c.metrics) },
  );
  return { ranked: rankFree(scores).map((s) => s.name), scores };
}

/** Free KV tokens of one scrape (rounded to whole tokens); null when capacity or usage is not reported. */
export function freeKv(m: BackendMetrics): number | null {
  if (m.kvCapacityTokens === null || m.kvUsage === null) return null;
  const usage = Math.min(1, Math.max(0, m.kvUsage));
  // Whole tokens: usage is a float ratio, and float noise must not break ties between equal loads.
  return Math.round(m.kvCapacityTokens * (1 - usage));
}
