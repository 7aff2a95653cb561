// The contract every advantage estimator passes: shapes, masks, normalised weights, per-chunk broadcast, and
// exactness of the loss when the batch is packed as a prefix tree.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ScoredSample } from "../batch-sample.js";
import { buildTreeBatch, ratioUnits } from "../tree/tree-batch.js";
import type { Estimator } from "./estimator.js";
import { referenceLoss, validateLossSpec } from "./loss-spec.js";
import { fixtureSet, type FixtureProgram } from "../../testing/estimator-fixtures.js";

const programsArb = fc.array(
  fc.record({
    group: fc.constantFrom("a", "b", "c"),
    reward: fc.constantFrom(0, 0.5, 1),
    chunks: fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: 4 }),
    steps: fc.option(fc.constant(true)),
  }),
  { minLength: 1, maxLength: 12 },
);

function toPrograms(raw: { group: string; reward: number; chunks: number[]; steps: true | null }[]): FixtureProgram[] {
  return raw.map((r, i) => ({ id: `p${i}`, group: r.group, reward: r.reward, chunks: r.chunks, ...(r.steps ? { steps: r.chunks.map((_, k) => k / 10) } : {}) }));
}

/** A deterministic stand-in for the new policy's logprob of `target` after `context`. */
function fakeLogprob(context: readonly number[], target: number): number {
  let h = target * 31 + context.length;
  for (const c of context) h = (h * 17 + c) % 9973;
  return -0.05 - (h % 97) / 200;
}

/** Run the shared estimator contract against `make()`. */
export function estimatorContract(name: string, make: () => Estimator): void {
  describe(`estimator contract: ${name}`, () => {
    it("names itself and carries a valid loss spec", () => {
      const e = make();
      expect(e.name).toBe(name);
      expect(validateLossSpec(e.loss)).toBe(e.loss);
    });

    it("scores every kept sample: aligned arrays, zero off-mask, normalised weights, one advantage per chunk", () => {
      fc.assert(
        fc.property(programsArb, (raw) => {
          const set = fixtureSet(toPrograms(raw));
          const { samples, dropped, loss } = make().score(set);
          const droppedIds = new Set(dropped.map((d) => d.groupId));
          expect(samples.map((s) => s.id)).toEqual(set.samples.filter((s) => !droppedIds.has(s.groupId)).map((s) => s.id));
          let total = 0;
          let tokens = 0;
          for (const s of samples) {
            expect(s.advantages).toHaveLength(s.tokenIds.length);
            expect(s.weights).toHaveLength(s.tokenIds.length);
            const perChunk = new Map<number, number>();
            s.lossMask.forEach((m, i) => {
              expect(Number.isFinite(s.advantages[i])).toBe(true);
              if (!m) {
                expect([s.advantages[i], s.weights[i]]).toEqual([0, 0]);
                return;
              }
              tokens++;
              total += s.weights[i] as number;
              expect(s.weights[i]).toBeGreaterThan(0);
              const c = s.chunks[i] as number;
              if (perChunk.has(c)) expect(s.advantages[i]).toBe(perChunk.get(c));
              perChunk.set(c, s.advantages[i] as number);
            });
          }
          if (tokens > 0) {
            const nonEmpty = samples.filter((s) => s.lossMask.includes(1)).length;
            const expected = loss.normaliser === "constant" ? tokens / (nonEmpty * (loss.normaliserConstant as number)) : 1;
            expect(total).toBeCloseTo(expected, 9);
          }
        }),
        { numRuns: 60 },
      );
    });

    it("the loss on the prefix tree equals the loss on the separate samples", () => {
      fc.assert(
        fc.property(programsArb, (raw) => {
          const { samples, loss } = make().score(fixtureSet(toPrograms(raw)));
          // Flat: one term per model token, in sample order.
          const flat = { logprob: [] as number[], oldLogprob: [] as number[], advantage: [] as number[], weight: [] as number[], termSample: [] as number[], termToken: [] as number[] };
          samples.forEach((s: ScoredSample, si) =>
            s.lossMask.forEach((m, i) => {
              if (!m) return;
              flat.logprob.push(fakeLogprob(s.tokenIds.slice(0, i), s.tokenIds[i] as number));
              flat.oldLogprob.push(Math.fround(s.oldLogprobs[i] as number));
              flat.advantage.push(Math.fround(s.advantages[i] as number));
              flat.weight.push(Math.fround(s.weights[i] as number));
              flat.termSample.push(si);
              flat.termToken.push(i);
            }),
          );
          const flatLoss = referenceLoss(loss, { ...flat, unit: ratioUnits(loss, samples, flat.termSample, flat.termToken) });
          const tb = buildTreeBatch(samples, loss);
          const t = tb.tree;
          const ctx = (node: number): number[] => {
            const out: number[] = [];
            for (let n = node; n >= 0; n = t.parents[n] as number) out.push(t.tokens[n] as number);
            return out.reverse();
          };
          const treeLoss = referenceLoss(loss, {
            logprob: Array.from(t.terms.node, (n, j) => fakeLogprob(ctx(n), t.terms.target[j] as number)),
            oldLogprob: t.terms.oldLogprob,
            advantage: t.terms.advantage,
            weight: t.terms.weight,
            unit: tb.termUnit,
          });
          expect(treeLoss.loss).toBeCloseTo(flatLoss.loss, 12);
          expect(treeLoss.units).toBe(flatLoss.units);
          expect(tb.stats.treeTokens).toBeLessThanOrEqual(tb.stats.flatTokens);
        }),
        { numRuns: 60 },
      );
    });
  });
}
