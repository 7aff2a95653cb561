// The advantage-estimator plugin interface and the machinery every estimator shares: grouping programs,
// dynamic sampling, broadcasting a program's (or chunk's) advantage to its tokens, and loss weights.
import { ArborError } from "../../core/errors.js";
import type { BatchSample, ProgramOutcome, SampleSet, ScoredSample } from "../batch-sample.js";
import type { LossSpec } from "./loss-spec.js";

/** A group removed from the batch, and why (dynamic sampling). */
export interface DroppedGroup {
  groupId: string;
  reason: string;
  programs: number;
}

/** Scored samples ready for packing, the loss to train them with, and what was dropped. */
export interface ScoredBatch {
  samples: ScoredSample[];
  loss: LossSpec;
  dropped: DroppedGroup[];
}

/** An advantage estimator: turns a sample set into scored samples and names its loss. */
export interface Estimator {
  readonly name: string;
  readonly loss: LossSpec;
  score(set: SampleSet): ScoredBatch;
}

/**
 * Per-chunk advantages of every program of one group, in the group's order: `result[i][k]` is the advantage
 * of chunk k of `programs[i]` (a rollout-level advantage is the same number for every k).
 */
export type GroupAdvantages = (programs: readonly ProgramOutcome[]) => number[][];

/** How {@link makeEstimator} builds an estimator. */
export interface EstimatorParts {
  name: string;
  loss: LossSpec;
  advantages: GroupAdvantages;
  /** Drop groups whose rewards are all equal (DAPO dynamic sampling). */
  dropUniformGroups?: boolean;
}

function fail(message: string): never {
  throw new ArborError(message, "batch");
}

/** Programs by group, in order of first appearance. */
export function groupPrograms(programs: readonly ProgramOutcome[]): Map<string, ProgramOutcome[]> {
  const out = new Map<string, ProgramOutcome[]>();
  for (const p of programs) {
    const g = out.get(p.groupId);
    if (g) g.push(p);
    else out.set(p.groupId, [p]);
  }
  return out;
}

/** A rollout-level advantage, broadcast to every chunk (call) of each program. */
export function broadcast(programs: readonly ProgramOutcome[], perProgram: readonly number[]): number[][] {
  return programs.map((p, i) => new Array<number>(p.chunkCount).fill(perProgram[i] as number));
}

/** Mean of rewards. */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Per-token loss weights of `samples` under `loss.normaliser` (0 where the mask is 0). */
export function lossWeights(samples: readonly BatchSample[], loss: LossSpec): number[][] {
  const tokensOf = samples.map((s) => s.lossMask.reduce((a, m) => a + m, 0));
  const total = tokensOf.reduce((a, b) => a + b, 0);
  const nonEmpty = tokensOf.filter((n) => n > 0).length;
  const unitTokens = new Map<string, number>();
  if (loss.normaliser === "unit-mean") {
    samples.forEach((s, si) =>
      s.lossMask.forEach((m, i) => {
        if (m) unitTokens.set(unitKey(loss, s, si, i), (unitTokens.get(unitKey(loss, s, si, i)) ?? 0) + 1);
      }),
    );
  }
  return samples.map((s, si) =>
    s.lossMask.map((m, i) => {
      if (!m) return 0;
      switch (loss.normaliser) {
        case "token-mean":
          return 1 / total;
        case "sample-mean":
          return 1 / ((tokensOf[si] as number) * nonEmpty);
        case "unit-mean":
          return 1 / ((unitTokens.get(unitKey(loss, s, si, i)) as number) * unitTokens.size);
        case "constant":
          return 1 / (nonEmpty * (loss.normaliserConstant as number));
      }
    }),
  );
}

function unitKey(loss: LossSpec, s: BatchSample, si: number, i: number): string {
  if (loss.ratio === "chunk") return `${si}/${s.chunks[i]}`;
  if (loss.ratio === "sequence") return `${si}`;
  return `${si}/${i}`;
}

/**
 * Build an estimator from its parts: group the programs, optionally drop uniform groups, compute per-chunk
 * advantages, broadcast them to each model token (by its chunk) and attach loss weights. Throws an
 * {@link ArborError} when a sample's program has no outcome or an advantage is not finite.
 */
export function makeEstimator(parts: EstimatorParts): Estimator {
  return {
    name: parts.name,
    loss: parts.loss,
    score(set: SampleSet): ScoredBatch {
      const dropped: DroppedGroup[] = [];
      const chunkAdv = new Map<string, number[]>();
      for (const [groupId, programs] of groupPrograms(set.programs)) {
        if (parts.dropUniformGroups && programs.every((p) => p.reward === programs[0]?.reward)) {
          dropped.push({ groupId, reason: `all ${programs.length} rewards equal ${programs[0]?.reward}: no learning signal`, programs: programs.length });
          continue;
        }
        const adv = parts.advantages(programs);
        programs.forEach((p, i) => {
          const a = adv[i] as number[];
          a.forEach((x, k) => {
            if (!Number.isFinite(x)) fail(`${parts.name}: advantage of program '${p.programId}' chunk ${k} is ${x}`);
          });
          chunkAdv.set(p.programId, a);
        });
      }
      const droppedIds = new Set(dropped.map((d) => d.groupId));
      const kept: BatchSample[] = [];
      for (const s of set.samples) {
        if (droppedIds.has(s.groupId)) continue;
        if (!chunkAdv.has(s.programId)) fail(`${parts.name}: sample '${s.id}' belongs to program '${s.programId}', which has no outcome`);
        kept.push(s);
      }
      const weights = lossWeights(kept, parts.loss);
      const samples = kept.map((s, si): ScoredSample => {
        const adv = chunkAdv.get(s.programId) as number[];
        const advantages = s.lossMask.map((m, i) => {
          if (!m) return 0;
          const a = adv[s.chunks[i] as number];
          if (a === undefined) fail(`${parts.name}: sample '${s.id}' token ${i} is in chunk ${s.chunks[i]}, beyond its program's ${adv.length}`);
          return a;
        });
        return { ...s, advantages, weights: weights[si] as number[] };
      });
      return { samples, loss: parts.loss, dropped };
    },
  };
}
