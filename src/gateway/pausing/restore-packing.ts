// Restore planning for the global waiting queue (ThunderAgent §B1): priority decides WHICH paused
// programs come back, decreasing-size bin packing decides WHERE. Pure function, no state.
import type { RestorePlacement } from "./pause-config.js";

/** Restore priority group: a held call of a program that ran before, a new program's first call, an idle paused program. */
export type RestoreGroup = "reasoning" | "new" | "acting";

export interface RestoreCandidate {
  id: string;
  /** Context tokens c (KV footprint to re-create). */
  tokens: number;
  group: RestoreGroup;
  /** Tie-break among equal (group, tokens): lower first (the queue position). */
  order: number;
  /** The backend it was paused from (null for a new program): "origin" placement restores it there only. */
  origin?: string | null;
}

export interface BinRoom {
  backend: string;
  /** Tokens that may still be added before the backend reaches λmax·C. */
  free: number;
}

export interface RestorePlacementResult {
  id: string;
  backend: string;
}

const GROUP_RANK: Record<RestoreGroup, number> = { reasoning: 0, new: 1, acting: 2 };

/**
 * Plan restores, following ThunderAgent's `_greedy_resume` (scheduler/router.py):
 * 1. Order candidates reasoning → new → acting, each group smallest-first (S_restore = 1/c + 𝟙[R]).
 * 2. Walk that order and select each candidate whose `tokens + buffer` still fits in the SUM of
 *    free room over all bins (a candidate that does not fit is skipped, later smaller ones may).
 *    This is how the priority order and bin packing are reconciled: priority picks the set.
 * 3. Place the selected set largest-first (decreasing), each on the bin chosen by `placement`
 *    ("most-free" as ThunderAgent, "best-fit" = textbook BFD, "origin" = its origin, or the most
 *    free bin for a candidate without one); one that fits no bin stays queued. Under "origin" a
 *    selected program whose origin has no room stays queued too, and the room it was selected for
 *    goes to no one after it in priority this time (measured on `arbor sim`'s agent workloads, this
 *    restores fewer programs into a crowded cluster than selecting past it does).
 * Bins are not mutated; the returned order is the placement order.
 */
export function planRestore(
  candidates: readonly RestoreCandidate[],
  bins: readonly BinRoom[],
  bufferPerProgram: number,
  placement: RestorePlacement,
): RestorePlacementResult[] {
  const room = bins.filter((b) => b.free > 0).map((b) => ({ ...b }));
  if (room.length === 0 || candidates.length === 0) return [];
  const total = room.reduce((s, b) => s + b.free, 0);

  const byPriority = [...candidates].sort(
    (a, b) => GROUP_RANK[a.group] - GROUP_RANK[b.group] || a.tokens - b.tokens || a.order - b.order,
  );
  const selected: RestoreCandidate[] = [];
  let cumulative = 0;
  for (const c of byPriority) {
    const need = c.tokens + bufferPerProgram;
    if (cumulative + need <= total) {
      selected.push(c);
      cumulative += need;
    }
  }

  // Stable sort keeps priority order among equal sizes.
  selected.sort((a, b) => b.tokens - a.tokens);
  const out: RestorePlacementResult[] = [];
  for (const c of selected) {
    const need = c.tokens + bufferPerProgram;
    let pick: (typeof room)[number] | undefined;
    if (placement === "origin" && c.origin != null) pick = room.find((b) => b.backend === c.origin && b.free >= need);
    else {
      for (const b of room) {
        if (b.free < need) continue;
        if (!pick) pick = b;
        else if (placement === "best-fit" ? b.free < pick.free : b.free > pick.free) pick = b;
      }
    }
    if (!pick) continue;
    pick.free -= need;
    out.push({ id: c.id, backend: pick.backend });
  }
  return out;
}
