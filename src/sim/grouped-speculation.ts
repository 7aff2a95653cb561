// Seer's grouped speculative decoding as the rollout simulation models it: a request drafts from its
// group's suffix tree, which grows as its siblings finish, so its mean acceptance length rises with the
// number of finished siblings (Seer: 1.70 with none → 2.85 with 15, multi-path; docs/references.md). The
// curve is given as points and interpolated in log(1 + siblings): the first finished siblings add the most
// (`arbor bench specdec` table c measured that shape on real groups), later ones less.
import { ArborError } from "../core/errors.js";
import { acceptanceForMeanLength } from "../engine/costmodel/costmodel-executor.js";

/** Grouped speculation in a rollout simulation. */
export interface GroupedSpeculation {
  /** Draft tokens proposed per step; Seer's adaptive budget verifies fewer when the batch is large. */
  maxSpecTokens: number;
  /** [finished siblings, mean acceptance length] points, siblings strictly ascending; flat past the ends. */
  meanLengthBySiblings: readonly (readonly [number, number])[];
}

/** Seer's published curve (mean acceptance length with 0 and 15 finished siblings, multi-path drafts). */
export const SEER_GROUPED_SPECULATION: GroupedSpeculation = {
  // As `arbor bench specdec` table (d); the adaptive budget verifies fewer where they do not pay.
  maxSpecTokens: 6,
  meanLengthBySiblings: [
    [0, 1.7],
    [15, 2.85],
  ],
};

/**
 * Per-position acceptance rates for a request with `siblings` finished siblings, memoised by count:
 * the constant rate whose expected run gives the interpolated mean length (acceptanceForMeanLength).
 */
export class SiblingAcceptance {
  private readonly memo = new Map<number, readonly number[]>();

  constructor(private readonly spec: GroupedSpeculation) {
    const pts = spec.meanLengthBySiblings;
    if (pts.length === 0) throw new ArborError("speculation.meanLengthBySiblings must have at least one point", "config");
    pts.forEach(([n, len], i) => {
      if (!(Number.isInteger(n) && n >= 0)) throw new ArborError(`speculation.meanLengthBySiblings[${i}]: siblings must be an integer >= 0, got ${n}`, "config");
      if (i > 0 && n <= (pts[i - 1] as readonly [number, number])[0]) throw new ArborError(`speculation.meanLengthBySiblings[${i}]: siblings must be strictly ascending`, "config");
      // acceptanceForMeanLength checks the length against maxSpecTokens.
      acceptanceForMeanLength(len, spec.maxSpecTokens);
    });
  }

  /** Mean acceptance length with `siblings` finished siblings. */
  meanLength(siblings: number): number {
    const pts = this.spec.meanLengthBySiblings;
    const first = pts[0] as readonly [number, number];
    if (siblings <= first[0]) return first[1];
    for (let i = 1; i < pts.length; i++) {
      const [n1, l1] = pts[i] as readonly [number, number];
      if (siblings > n1) continue;
      const [n0, l0] = pts[i - 1] as readonly [number, number];
      const t = (Math.log1p(siblings) - Math.log1p(n0)) / (Math.log1p(n1) - Math.log1p(n0));
      return l0 + t * (l1 - l0);
    }
    return (pts[pts.length - 1] as readonly [number, number])[1];
  }

  /** The acceptance rates (one, for every position) with `siblings` finished siblings. */
  rates(siblings: number): readonly number[] {
    let r = this.memo.get(siblings);
    if (r === undefined) {
      r = [acceptanceForMeanLength(this.meanLength(siblings), this.spec.maxSpecTokens)];
      this.memo.set(siblings, r);
    }
    return r;
  }
}
