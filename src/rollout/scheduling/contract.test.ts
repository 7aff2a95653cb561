// The contract every rollout scheduling policy passes: driven by a fake cluster over random
// workloads, chunk sizes and aborts, every request is placed with at most one chunk in flight,
// continues exactly where it stopped, finishes exactly once, and no ready request is passed over by
// a younger one once it has waited past the starvation bound.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRolloutScheduler, rolloutSchedulerNames } from "./registry.js";
import type { InstanceView, Placement, RolloutGroupSpec } from "./types.js";

interface Chunk {
  p: Placement;
  endAt: number;
  tokens: number;
  finished: boolean;
}

interface Scenario {
  groups: { arrive: number; lengths: number[] }[];
  instances: number;
  maxActive: number;
  chunkTokens: number;
  starvationMs: number;
  aborts: boolean[];
}

const MAX_TOKENS = 40;
const PROMPT = 5;

/** Drive one policy through a scenario; returns violations (empty = contract kept). */
function drive(name: string, s: Scenario): { violations: string[]; placements: number } {
  const pol = createRolloutScheduler(name, { chunkTokens: s.chunkTokens, starvationMs: s.starvationMs });
  const violations: string[] = [];
  const specs: RolloutGroupSpec[] = s.groups.map((g, gi) => ({
    id: `g${gi}`,
    requests: g.lengths.map((len, i) => ({ id: `g${gi}/r${i}`, groupId: `g${gi}`, index: i, promptTokens: PROMPT, maxTokens: MAX_TOKENS, oracleLength: len })),
  }));
  const truth = new Map(specs.flatMap((g) => g.requests.map((r) => [r.id, r.oracleLength as number] as const)));
  const generated = new Map<string, number>();
  const finishedCount = new Map<string, number>();
  const readySince = new Map<string, number>();
  const inFlight = new Map<string, Chunk>();
  const inst = Array.from({ length: s.instances }, (_, i) => `i${i}`);
  let abortIdx = 0;
  const aborted = new Map<string, number>();
  let placements = 0;
  let now = 0;
  const views = (): InstanceView[] =>
    inst.map((name) => {
      const mine = [...inFlight.values()].filter((c) => c.p.instance === name);
      return { name, kvCapacityTokens: (PROMPT + MAX_TOKENS) * 2, usedKvTokens: mine.reduce((a, c) => a + PROMPT + c.p.generated + c.p.maxTokens, 0), active: mine.length, maxActive: s.maxActive };
    });
  const schedule = (): void => {
    const out = pol.next(views(), now);
    const placedReady = new Map(out.map((p) => [p.requestId, readySince.get(p.requestId) as number]));
    for (const p of out) {
      placements++;
      if (!truth.has(p.requestId)) violations.push(`unknown request ${p.requestId} placed`);
      if (inFlight.has(p.requestId)) violations.push(`${p.requestId} placed while a chunk is in flight`);
      if ((finishedCount.get(p.requestId) ?? 0) > 0) violations.push(`${p.requestId} placed after it finished`);
      if (!inst.includes(p.instance)) violations.push(`${p.requestId} placed on unknown instance ${p.instance}`);
      const gen = generated.get(p.requestId) ?? 0;
      if (p.generated !== gen) violations.push(`${p.requestId} continues from ${p.generated}, generated ${gen}`);
      if (!(p.maxTokens >= 1 && p.generated + p.maxTokens <= MAX_TOKENS)) violations.push(`${p.requestId} chunk budget ${p.maxTokens} out of range`);
      const remaining = (truth.get(p.requestId) as number) - gen;
      // At most two aborts per request, so every scenario ends.
      const abort = (s.aborts[abortIdx++ % Math.max(1, s.aborts.length)] ?? false) && (aborted.get(p.requestId) ?? 0) < 2;
      if (abort) aborted.set(p.requestId, (aborted.get(p.requestId) ?? 0) + 1);
      const full = Math.min(p.maxTokens, remaining);
      const tokens = abort ? Math.floor(full / 2) : full;
      inFlight.set(p.requestId, { p, endAt: now + 1 + tokens, tokens, finished: !abort && full === remaining });
      readySince.delete(p.requestId);
    }
    // Starvation: nothing placed now may be younger than a request left waiting past the bound.
    for (const [id, since] of readySince) {
      if (now - since < s.starvationMs) continue;
      for (const p of out) {
        const ps = placedReady.get(p.requestId) as number;
        if (ps > since) violations.push(`${p.requestId} (ready at ${ps}) placed at ${now} while ${id} waits since ${since}`);
      }
    }
  };
  const arrivals = specs.map((g, gi) => ({ at: (s.groups[gi] as Scenario["groups"][number]).arrive, g }));
  for (let guard = 0; guard < 10_000; guard++) {
    const nextArrival = Math.min(...arrivals.map((a) => a.at));
    const nextEnd = Math.min(...[...inFlight.values()].map((c) => c.endAt));
    const t = Math.min(nextArrival, nextEnd);
    if (t === Infinity) break;
    now = t;
    for (const a of arrivals.filter((x) => x.at === t)) {
      pol.addGroup(a.g, now);
      for (const r of a.g.requests) readySince.set(r.id, now);
      a.at = Infinity;
    }
    for (const c of [...inFlight.values()].filter((x) => x.endAt === t)) {
      inFlight.delete(c.p.requestId);
      const gen = (generated.get(c.p.requestId) ?? 0) + c.tokens;
      generated.set(c.p.requestId, gen);
      pol.onChunkEnd(c.p.requestId, c.tokens, c.finished, now);
      if (c.finished || gen === MAX_TOKENS) finishedCount.set(c.p.requestId, (finishedCount.get(c.p.requestId) ?? 0) + 1);
      else readySince.set(c.p.requestId, now);
    }
    schedule();
  }
  for (const [id, len] of truth) {
    if ((finishedCount.get(id) ?? 0) !== 1) violations.push(`${id} finished ${finishedCount.get(id) ?? 0} times`);
    if (generated.get(id) !== len) violations.push(`${id} generated ${generated.get(id)} of ${len}`);
  }
  if (pol.unfinished() !== 0) violations.push(`policy reports ${pol.unfinished()} unfinished`);
  return { violations, placements };
}

const scenario: fc.Arbitrary<Scenario> = fc.record({
  groups: fc.array(fc.record({ arrive: fc.integer({ min: 0, max: 60 }), lengths: fc.array(fc.integer({ min: 1, max: MAX_TOKENS }), { minLength: 1, maxLength: 4 }) }), { minLength: 1, maxLength: 6 }),
  instances: fc.integer({ min: 1, max: 3 }),
  maxActive: fc.integer({ min: 1, max: 4 }),
  chunkTokens: fc.integer({ min: 1, max: 50 }),
  starvationMs: fc.integer({ min: 0, max: 80 }),
  aborts: fc.array(fc.boolean(), { maxLength: 7 }),
});

describe.each(rolloutSchedulerNames)("rollout scheduler contract: %s", (name) => {
  it("places every request with one chunk in flight, continues where it stopped, finishes it once, starves nothing", () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const { violations } = drive(name, s);
        expect(violations).toEqual([]);
      }),
      { numRuns: 150, seed: 6 },
    );
  });

  it("rejects reused ids, unknown requests and over-budget chunks with a clear error", () => {
    const pol = createRolloutScheduler(name, {});
    const g = { id: "g", requests: [{ id: "g/0", groupId: "g", index: 0, promptTokens: 3, maxTokens: 4, oracleLength: 2 }] };
    pol.addGroup(g, 0);
    expect(() => pol.addGroup(g, 0)).toThrow(/already added/);
    expect(() => pol.onChunkEnd("nope", 1, true, 0)).toThrow(/unknown request nope/);
    expect(() => pol.onChunkEnd("g/0", 1, true, 0)).toThrow(/which is ready/);
    const [p] = pol.next([{ name: "a", kvCapacityTokens: 100, usedKvTokens: 0, active: 0, maxActive: 2 }], 0);
    expect(p?.requestId).toBe("g/0");
    expect(() => pol.onChunkEnd("g/0", 5, true, 1)).toThrow(/over its maxTokens 4/);
    pol.onChunkEnd("g/0", 2, true, 1);
    expect(pol.unfinished()).toBe(0);
    // A finished group is forgotten (bounded memory): its ids are unknown from then on.
    expect(() => pol.onChunkEnd("g/0", 0, true, 2)).toThrow(/unknown request g\/0/);
    expect(pol.next([{ name: "a", kvCapacityTokens: 100, usedKvTokens: 0, active: 0, maxActive: 2 }], 2)).toEqual([]);
  });
});

describe("rollout scheduler registry", () => {
  it("lists the policies and refuses unknown names", () => {
    expect(rolloutSchedulerNames).toEqual(["fifo-group", "divided-fifo", "seer", "oracle-lfs"]);
    expect(() => createRolloutScheduler("lifo")).toThrow(/unknown rollout scheduler 'lifo' \(known: fifo-group, divided-fifo, seer, oracle-lfs\)/);
  });
});
