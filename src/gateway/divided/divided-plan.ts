// Seer's divided rollout, the rules written once: how many tokens the next chunk asks for, how much
// KV its whole context needs where it runs, when a generation is over, and which instance takes a
// chunk (the most free KV, ties in the configured order). I/O-free. The gateway's DividedRollout
// (real backends, token ids; chunk-planner.ts, placement.ts) and the rollout scheduling policies
// (token counts; src/rollout/scheduling/divided-scheduler.ts) both plan with these, so the
// simulated policy and the served one cannot drift apart. It sits in the gateway layer, which the
// rollout layer may import.
import { ArborError } from "../../core/errors.js";

/** Check a chunk size: an integer >= 1, or Infinity (no division). `who` and `field` name it in the error. */
export function checkChunkTokens(who: string, field: string, chunkTokens: number, code: string): void {
  if (!(chunkTokens === Infinity || (Number.isInteger(chunkTokens) && chunkTokens >= 1))) {
    throw new ArborError(`${who}: ${field} must be an integer >= 1, got ${chunkTokens}`, code);
  }
}

/** Tokens the next chunk asks for: min(chunkTokens, maxTokens − generated). 0 once the budget is spent. */
export function nextChunkTokens(chunkTokens: number, maxTokens: number, generated: number): number {
  return Math.max(0, Math.min(chunkTokens, maxTokens - generated));
}

/** KV tokens the next chunk's whole context holds at its end: prompt ‖ generated ‖ the chunk. */
export function chunkKvNeed(promptTokens: number, generated: number, chunk: number): number {
  return promptTokens + generated + chunk;
}

/** Chunks a budget of `maxTokens` takes at most, in chunks of `chunkTokens`. */
export function chunksNeeded(maxTokens: number, chunkTokens: number): number {
  return Math.ceil(maxTokens / chunkTokens);
}

/**
 * Whether a generation is over after a chunk: it stopped (stop token), was aborted, spent its
 * budget, or the engine gave fewer tokens than asked without a stop (its own length limit: its
 * context is full, so a next chunk could only be refused).
 */
export function generationEnded(o: { stopped: boolean; aborted: boolean; generated: number; maxTokens: number; chunkAsked: number; chunkGot: number }): boolean {
  return o.stopped || o.aborted || o.generated >= o.maxTokens || o.chunkGot < o.chunkAsked;
}

/** An instance as placement sees it. */
export interface FreeKvCandidate {
  name: string;
  /** Free KV tokens; null when unknown (the instance then ranks after every known one). */
  freeKvTokens: number | null;
  /** Why the instance cannot take a chunk now; such candidates are left out of the ranking. */
  unavailable?: string;
}

/**
 * Rank candidates for a chunk, best first: known free KV before unknown, more free KV first, ties
 * (and unknowns) in the given order, so the same loads always give the same choice.
 */
export function rankByFreeKv<C extends FreeKvCandidate>(candidates: readonly C[]): C[] {
  return candidates
    .map((c, i) => ({ c, i }))
    .filter(({ c }) => c.unavailable === undefined)
    .sort((a, b) => {
      const fa = a.c.freeKvTokens;
      const fb = b.c.freeKvTokens;
      if (fa !== null && fb !== null && fa !== fb) return fb - fa;
      if ((fa === null) !== (fb === null)) return fa === null ? 1 : -1;
      return a.i - b.i;
    })
    .map(({ c }) => c);
}

/**
 * The first of rankByFreeKv(candidates) in one pass, without sorting (the scheduling policies ask it for
 * every ready chunk they try to place): the most known free KV, the first of equals, an unknown one only
 * when none is known. `available` says which candidates may take the chunk (default: not `unavailable`).
 */
export function mostFreeKv<C extends FreeKvCandidate>(candidates: readonly C[], available: (c: C) => boolean = (c) => c.unavailable === undefined): C | undefined {
  let best: C | undefined;
  for (const c of candidates) {
    if (!available(c)) continue;
    const f = c.freeKvTokens;
    if (best === undefined || (f !== null && (best.freeKvTokens === null || f > best.freeKvTokens))) best = c;
  }
  return best;
}
