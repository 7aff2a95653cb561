// Seer's adaptive speculation budget: how many draft tokens each decode request verifies this step,
// chosen to maximise expected tokens per millisecond. Two models fitted to what the engine measured:
//   - step time T(n) = a + b·n over the step's batched tokens n (least squares over recent steps);
//   - acceptance: P(draft position i accepted | position i−1 accepted), counted per position with
//     exponential forgetting (the policy and the text change during a run).
// A draft token at position i gains g_i = Π_{j≤i} p_j expected tokens; adding it pays iff the
// expected tokens per ms rise: (E + g) / T(n + 1) > E / T(n) ⟺ g·T(n) > E·b. So a small batch (the
// long tail, where a step costs mostly its fixed part a) speculates deeply and a large batch (compute
// bound) not at all. Candidates are taken by gain; where the step's token budget runs short, equal
// gains go to the requests with the most output first (Seer: long-tail requests first). Until both models have data, and every `exploreEvery` steps
// after that, every draft is verified in full, so the acceptance counts never go stale at zero.
// I/O-free: the scheduler calls `plan` and `observe*`; durations come from the step results.

/** Knobs of the adaptive budget (defaults in brackets). */
export interface DraftBudgetOptions {
  /** Draft positions tracked [16]; deeper positions share the last one's counts. */
  maxPositions?: number;
  /** Steps kept for the step-time fit [64]. */
  window?: number;
  /** Steps with distinct token counts needed before the fit is used [8]. */
  minSteps?: number;
  /** Decay applied to the acceptance counts per verified draft [0.995]. */
  decay?: number;
  /** Verify every draft in full on every k-th step [32] (0: never explore). */
  exploreEvery?: number;
}

/** A decode request's draft this step. */
export interface DraftCandidate {
  requestId: string;
  /** Draft tokens available (and allowed by KV, budget and max_tokens). */
  available: number;
  /** Output tokens so far (ties go to the longest). */
  outputTokens: number;
}

/** The step-time fit: T(n) = intercept + slope·n, ms. */
export interface StepTimeFit {
  interceptMs: number;
  slopeMs: number;
}

/** See the file header. */
export class DraftBudget {
  private readonly maxPositions: number;
  private readonly window: number;
  private readonly minSteps: number;
  private readonly decay: number;
  private readonly exploreEvery: number;
  /** Per position: decayed counts of drafts that reached it and that were accepted there (Beta(1,1) prior). */
  private readonly reached: number[];
  private readonly accepted: number[];
  private readonly steps: { tokens: number; ms: number }[] = [];
  private planned = 0;

  constructor(o: DraftBudgetOptions = {}) {
    this.maxPositions = o.maxPositions ?? 16;
    this.window = o.window ?? 64;
    this.minSteps = o.minSteps ?? 8;
    this.decay = o.decay ?? 0.995;
    this.exploreEvery = o.exploreEvery ?? 32;
    for (const [k, v, min] of [
      ["maxPositions", this.maxPositions, 1],
      ["window", this.window, 2],
      ["minSteps", this.minSteps, 2],
      ["exploreEvery", this.exploreEvery, 0],
    ] as const) {
      if (!Number.isInteger(v) || v < min) throw new RangeError(`draft budget: ${k} must be an integer >= ${min}, got ${v}`);
    }
    if (!(this.decay > 0 && this.decay <= 1)) throw new RangeError(`draft budget: decay must be in (0, 1], got ${this.decay}`);
    if (this.minSteps > this.window) throw new RangeError(`draft budget: minSteps ${this.minSteps} exceeds window ${this.window}`);
    this.reached = new Array<number>(this.maxPositions).fill(0);
    this.accepted = new Array<number>(this.maxPositions).fill(0);
  }

  /** A finished step: its batched tokens and how long it took. */
  observeStep(tokens: number, durationMs: number): void {
    if (!(tokens > 0 && Number.isFinite(durationMs) && durationMs >= 0)) return;
    this.steps.push({ tokens, ms: durationMs });
    if (this.steps.length > this.window) this.steps.shift();
  }

  /** A verified draft of `drafted` tokens of which the first `accepted` were accepted. */
  observeDraft(drafted: number, accepted: number): void {
    const a = Math.min(accepted, drafted);
    // Positions 1..a were accepted; position a+1 (if drafted) was reached and rejected.
    const reachedUpTo = Math.min(drafted, a + 1);
    for (let i = 0; i < this.maxPositions; i++) {
      this.reached[i] = (this.reached[i] as number) * this.decay;
      this.accepted[i] = (this.accepted[i] as number) * this.decay;
    }
    for (let i = 1; i <= reachedUpTo; i++) {
      const p = Math.min(i, this.maxPositions) - 1;
      this.reached[p] = (this.reached[p] as number) + 1;
      if (i <= a) this.accepted[p] = (this.accepted[p] as number) + 1;
    }
  }

  /** P(position i accepted | position i−1 accepted), i ≥ 1 (Beta(1,1) prior: 0.5 before data). */
  acceptance(i: number): number {
    const p = Math.min(Math.max(i, 1), this.maxPositions) - 1;
    return ((this.accepted[p] as number) + 1) / ((this.reached[p] as number) + 2);
  }

  /** The least-squares step-time fit, or undefined while it has too few distinct points or a non-positive slope. */
  fit(): StepTimeFit | undefined {
    const n = this.steps.length;
    if (n < this.minSteps) return undefined;
    let sx = 0;
    let sy = 0;
    for (const s of this.steps) {
      sx += s.tokens;
      sy += s.ms;
    }
    const mx = sx / n;
    const my = sy / n;
    let sxx = 0;
    let sxy = 0;
    for (const s of this.steps) {
      sxx += (s.tokens - mx) ** 2;
      sxy += (s.tokens - mx) * (s.ms - my);
    }
    if (sxx === 0) return undefined;
    const slopeMs = sxy / sxx;
    // A slope ≤ 0 is noise (more tokens never cost less): no basis for a decision yet.
    if (!(slopeMs > 0)) return undefined;
    return { interceptMs: Math.max(0, my - slopeMs * mx), slopeMs };
  }

  /**
   * Draft tokens each candidate verifies this step. `baseTokens`: the step's tokens without drafts;
   * `sampling`: the tokens the step emits without drafts (one per decode request and finished prefill);
   * `room`: draft tokens the step's token budget leaves (the longest requests get them first).
   */
  plan(candidates: readonly DraftCandidate[], baseTokens: number, sampling: number, room = Infinity): Map<string, number> {
    const step = this.planned++;
    const fit = this.fit();
    const out = new Map<string, number>();
    // Greedy by gain; within a position, the longest requests first.
    const order = [...candidates].filter((c) => c.available > 0).sort((x, y) => y.outputTokens - x.outputTokens);
    if (fit === undefined || (this.exploreEvery > 0 && step % this.exploreEvery === this.exploreEvery - 1)) {
      for (const c of order) {
        const k = Math.min(c.available, room);
        if (k <= 0) break;
        out.set(c.requestId, k);
        room -= k;
      }
      return out;
    }
    // Cumulative gains per position: g_i = Π p_j, the same for every request.
    const maxAvail = Math.max(0, ...candidates.map((c) => c.available));
    const gain: number[] = [];
    let g = 1;
    for (let i = 1; i <= maxAvail; i++) gain.push((g *= this.acceptance(i)));
    let tokens = baseTokens;
    let emitted = Math.max(sampling, 1);
    for (let i = 1; i <= maxAvail; i++) {
      const gi = gain[i - 1] as number;
      for (const c of order) {
        if (c.available < i || (out.get(c.requestId) ?? 0) !== i - 1) continue;
        const t = fit.interceptMs + fit.slopeMs * tokens;
        if (tokens - baseTokens >= room || !(gi * t > emitted * fit.slopeMs)) return out;
        out.set(c.requestId, i);
        tokens += 1;
        emitted += gi;
      }
    }
    return out;
  }
}
