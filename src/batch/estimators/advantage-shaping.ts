// Advantage shaping on top of any estimator (issue 20 item 2; options in core/estimator-options.ts): the
// estimator computes its advantages as usual, then, per token of the loss mask,
//   - in a group none of whose programs solved its task (`zeroAdvantageUnsolvedGroups`), A = 0: with an outcome
//     and a process reward, all-wrong groups otherwise reward wrong but well-formed answers (issue 20's analysis);
//   - a negative A becomes max(s·A, f) (`negativeAdvantageScale` s, default 1; `negativeAdvantageFloor` f): the
//     many low-probability wrong samples' large gradients no longer drown the right ones';
//   - `positiveOnly` (rejection-sampling fine-tuning): A ≤ 0 becomes 0 and a sample left with no positive A is
//     dropped, so the loss normaliser counts only the samples learnt from; a group with none left is reported
//     as dropped.
// The loss weights are recomputed for the samples kept (they depend on masks and the normaliser only).
import { ArborError } from "../../core/errors.js";
import { AdvantageShapingSchema, SOLVED_OUTCOME, type AdvantageShaping } from "../../core/estimator-options.js";
import type { ProgramOutcome, ScoredSample } from "../batch-sample.js";
import { groupPrograms, lossWeights, type DroppedGroup, type Estimator } from "./estimator.js";

/** The shaping options of `raw` (the shaping keys of `train.estimatorOptions`), validated. */
export function parseAdvantageShaping(raw: Record<string, unknown>): AdvantageShaping {
  const parsed = AdvantageShapingSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ArborError(`train.estimatorOptions.${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`, "config");
  }
  return parsed.data;
}

/** One (negative) advantage after the scale and the floor; other values unchanged. */
export function shapeNegative(a: number, s: AdvantageShaping): number {
  if (a >= 0) return a;
  const scaled = a * (s.negativeAdvantageScale ?? 1);
  // + 0 turns the −0 of a zero scale into 0.
  return (s.negativeAdvantageFloor === undefined ? scaled : Math.max(scaled, s.negativeAdvantageFloor)) + 0;
}

/** Groups none of whose programs solved its task; throws when a program has no outcome to tell. */
export function unsolvedGroups(programs: readonly ProgramOutcome[]): Set<string> {
  const out = new Set<string>();
  for (const [groupId, ps] of groupPrograms(programs)) {
    for (const p of ps) {
      if (p.outcome === undefined) {
        throw new ArborError(`train.estimatorOptions.zeroAdvantageUnsolvedGroups: program '${p.programId}' has no outcome reward component (add the outcome reward)`, "batch");
      }
    }
    if (ps.every((p) => (p.outcome as number) < SOLVED_OUTCOME)) out.add(groupId);
  }
  return out;
}

/** True when `s` changes nothing (every option absent or at its neutral value). */
export function isNeutral(s: AdvantageShaping): boolean {
  return (s.negativeAdvantageScale ?? 1) === 1 && s.negativeAdvantageFloor === undefined && s.zeroAdvantageUnsolvedGroups !== true && s.positiveOnly !== true;
}

/** `estimator` with its advantages shaped by `s` (itself when `s` changes nothing). */
export function withAdvantageShaping(estimator: Estimator, s: AdvantageShaping): Estimator {
  if (isNeutral(s)) return estimator;
  return {
    name: estimator.name,
    loss: estimator.loss,
    score(set) {
      const scored = estimator.score(set);
      const unsolved = s.zeroAdvantageUnsolvedGroups ? unsolvedGroups(set.programs) : new Set<string>();
      let samples: ScoredSample[] = scored.samples.map((x) => ({
        ...x,
        advantages: x.advantages.map((a, i) => (!x.lossMask[i] || unsolved.has(x.groupId) ? 0 : shapeNegative(a, s))),
      }));
      const dropped: DroppedGroup[] = [...scored.dropped];
      if (s.positiveOnly) {
        const kept = samples.filter((x) => x.advantages.some((a, i) => x.lossMask[i] === 1 && a > 0));
        const keptGroups = new Set(kept.map((x) => x.groupId));
        const already = new Set(dropped.map((d) => d.groupId));
        for (const [groupId, ps] of groupPrograms(set.programs)) {
          if (!keptGroups.has(groupId) && !already.has(groupId)) dropped.push({ groupId, reason: "positiveOnly: no sample with a positive advantage", programs: ps.length });
        }
        samples = kept.map((x) => ({ ...x, advantages: x.advantages.map((a) => (a > 0 ? a : 0)) }));
      }
      const weights = lossWeights(samples, scored.loss);
      return { samples: samples.map((x, i) => ({ ...x, weights: weights[i] as number[] })), loss: scored.loss, dropped };
    },
  };
}
