import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { Rng } from "../../core/rng.js";
import { createRolloutScheduler } from "../scheduling/registry.js";
import type { InstanceView } from "../scheduling/types.js";
import { RolloutOrchestrator, type OrchestratorOptions } from "./orchestrator.js";

const inst: InstanceView[] = [{ name: "x", kvCapacityTokens: 1e6, usedKvTokens: 0, active: 0, maxActive: 100 }];
const tasks = Array.from({ length: 4 }, (_, i) => ({ id: `t${i}`, promptTokens: 2, maxTokens: 10 }));
const make = (o: Partial<OrchestratorOptions>) =>
  new RolloutOrchestrator({ mode: "sync", groupSize: 2, batchGroups: 2, tasks, rng: new Rng(1), scheduler: createRolloutScheduler("fifo-group"), clock: new VirtualClock(), ...o });

describe("rollout orchestrator", () => {
  it("sync: one iteration of B groups, the batch when all finish, the next only after new weights", () => {
    const syncs: number[] = [];
    const o = make({ onWeightSync: (v) => syncs.push(v) });
    expect(o.pump().map((g) => g.requests.length)).toEqual([2, 2]);
    const placed = o.next(inst);
    expect(placed).toHaveLength(4);
    for (const p of placed.slice(0, 3)) o.onChunkEnd(p.requestId, 4, 0, true);
    expect(o.takeBatch()).toBeUndefined();
    o.onChunkEnd((placed[3] as { requestId: string }).requestId, 10, 0, false); // budget spent: complete
    const b = o.takeBatch();
    expect(b).toMatchObject({ index: 0, version: 0, tokens: 22, meanStaleness: 0 });
    expect(b?.groups.map((g) => g.position)).toEqual([0, 1]);
    expect(o.pump()).toEqual([]); // waits for the trainer
    o.publishVersion(1);
    expect(syncs).toEqual([1]);
    expect(o.pump().map((g) => g.id)).toEqual(["g2", "g3"]);
    expect(o.stats()).toMatchObject({ admitted: 4, running: 2, consumed: 2 });
  });

  it("sync: a batch the trainer took without new weights lets the next iteration start on the same version; shuffle: false keeps task order", () => {
    const o = make({ shuffle: false, batchGroups: 1 });
    const ids = (): string[] => o.pump().map((g) => g.taskId);
    const finish = (): void => {
      for (const p of o.next(inst)) o.onChunkEnd(p.requestId, 1, o.version, true);
    };
    expect(ids()).toEqual(["t0"]);
    finish();
    expect(o.takeBatch()?.version).toBe(0);
    expect(ids()).toEqual([]); // waits for the trainer
    o.skipVersion();
    o.skipVersion(); // one skip per batch taken: the second changes nothing
    expect(ids()).toEqual(["t1"]);
    finish();
    expect(o.takeBatch()?.version).toBe(0);
    expect(ids()).toEqual([]);
    o.publishVersion(1);
    expect(ids()).toEqual(["t2"]);
  });

  it("async: keeps N groups in flight, takes completed ones from the window, records each token's version", () => {
    const o = make({ mode: "async", batchGroups: 1, maxInFlightGroups: 2, window: 1, groupSize: 1 });
    expect(o.pump().map((g) => g.id)).toEqual(["g0", "g1"]);
    const [p0, p1] = o.next(inst);
    o.onChunkEnd(p1!.requestId, 5, 0, true); // g1 done, but g0 (the head) is not: W = 1 waits
    expect(o.takeBatch()).toBeUndefined();
    o.onChunkEnd(p0!.requestId, 3, 0, false); // interrupted: partial rollout
    o.publishVersion(1);
    const [again] = o.next(inst);
    expect(again).toMatchObject({ requestId: p0!.requestId, generated: 3 });
    o.onChunkEnd(again!.requestId, 2, 1, true);
    const b = o.takeBatch();
    expect(b?.groups[0]?.trajectories[0]?.versions).toEqual([
      { version: 0, tokens: 3 },
      { version: 1, tokens: 2 },
    ]);
    expect(b).toMatchObject({ version: 1, tokens: 5, meanStaleness: 3 / 5, maxStaleness: 1 });
    expect(o.pump().map((g) => g.id)).toEqual(["g2"]);
  });

  it("async: excluded tasks leave the shuffled order, the others keep their places (a resumed run)", () => {
    const order = (exclude?: ReadonlySet<string>): string[] => {
      const o = make({ mode: "async", batchGroups: 1, maxInFlightGroups: 4, groupSize: 1, ...(exclude ? { exclude } : {}) });
      return o.pump().map((g) => g.taskId);
    };
    const all = order();
    expect([...all].sort()).toEqual(["t0", "t1", "t2", "t3"]);
    expect(all).not.toEqual(["t0", "t1", "t2", "t3"]); // shuffled (seed 1)
    const gone = new Set([all[0] as string, all[2] as string]);
    expect(order(gone)).toEqual(all.filter((t) => !gone.has(t)));
  });

  it("refuses inconsistent reports and bad options with the field named", () => {
    const o = make({});
    o.pump();
    const [p] = o.next(inst);
    expect(() => o.onChunkEnd("g9/s0", 1, 0, true)).toThrow(/g9\/s0, which has no chunk in flight/);
    expect(() => o.onChunkEnd(p!.requestId, 11, 0, true)).toThrow(/chunk of 10 tokens reported 11/);
    expect(() => o.onChunkEnd(p!.requestId, 1, 1, true)).toThrow(/version 1 after version 0 \(trainer at 0\)/);
    expect(() => o.publishVersion(0)).toThrow(/versions must increase/);
    expect(() => make({ batchGroups: 0 })).toThrow(/batchGroups must be an integer >= 1/);
    expect(() => make({ mode: "async", window: 0 })).toThrow(/window must be an integer >= 1/);
    expect(() => make({ tasks: [{ id: "t", promptTokens: 1, maxTokens: 5, oracleLengths: [1] }] })).toThrow(/1 oracleLengths for groupSize 2/);
  });

  it("a group the policy refuses is not admitted", () => {
    const o = make({ scheduler: createRolloutScheduler("oracle-lfs") });
    expect(() => o.pump()).toThrow(/has no oracleLength/);
    expect(o.stats().admitted).toBe(0);
  });
});
