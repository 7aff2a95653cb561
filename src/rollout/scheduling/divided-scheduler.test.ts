// The divided-rollout policy and the gateway's divided rollout plan with the same rules
// (src/gateway/divided/divided-plan.ts): checked here, where both may be imported.
import { describe, expect, it } from "vitest";
import { ChunkPlanner } from "../../gateway/divided/chunk-planner.js";
import { Rng } from "../../core/rng.js";
import { createOracleLfsScheduler } from "./oracle-lfs.js";
import { createSeerScheduler } from "./seer.js";

describe("divided scheduler and the gateway's divided rollout", () => {
  it("gives the gateway's chunk planner and the seer policy the same chunk sizes for one request", () => {
    const planner = new ChunkPlanner({ promptTokenIds: [1, 2, 3], maxTokens: 40, chunkTokens: 16, maxChunks: 8 });
    const seer = createSeerScheduler({ chunkTokens: 16 });
    seer.addGroup({ id: "g", requests: [{ id: "r", groupId: "g", index: 0, promptTokens: 3, maxTokens: 40 }] }, 0);
    const instances = [{ name: "i0", kvCapacityTokens: 1000, usedKvTokens: 0, active: 0, maxActive: 4 }];
    const gateway: number[] = [];
    const policy: number[] = [];
    for (let c = planner.next(); c !== null; c = planner.next()) {
      gateway.push(c.maxTokens);
      const [p] = seer.next(instances, 0);
      policy.push(p!.maxTokens);
      const out = Array.from({ length: c.maxTokens }, () => 7);
      planner.record("b", { outputTokenIds: out, logprobs: out.map(() => -1), finishReason: "length", policyVersion: 0, promptTokenIds: c.promptTokenIds });
      seer.onChunkEnd("r", c.maxTokens, planner.done, 0);
    }
    expect(gateway).toEqual([16, 16, 8]);
    expect(policy).toEqual(gateway);
  });

  it("places a chunk on the instance with the most free KV that fits it, ties in instance order", () => {
    const seer = createSeerScheduler({ chunkTokens: 10, kvAffinity: false });
    seer.addGroup({ id: "g", requests: [{ id: "r", groupId: "g", index: 0, promptTokens: 50, maxTokens: 40 }] }, 0);
    const view = (name: string, used: number, active = 0) => ({ name, kvCapacityTokens: 100, usedKvTokens: used, active, maxActive: 1 });
    // i2 has the most free KV but no slot; i0 and i3 tie on 70 free: the first in order wins.
    expect(seer.next([view("i0", 30), view("i1", 45), view("i2", 0, 1), view("i3", 30)], 0)).toMatchObject([{ instance: "i0", maxTokens: 10 }]);
  });

  it("places as a ranking of the whole queue would, though it ranks only what fits now", () => {
    // Reference: every ready request in the policy's order (longest oracle length first, then arrival), each on
    // the instance with the most free KV among those with a slot and room for its chunk (ties in instance order).
    const rng = new Rng(7);
    for (let round = 0; round < 200; round++) {
      const lfs = createOracleLfsScheduler({ chunkTokens: 20, kvAffinity: false });
      const reqs = Array.from({ length: 1 + rng.int(0, 30) }, (_, i) => ({ id: `r${i}`, groupId: `g${i}`, index: 0, promptTokens: rng.int(1, 120), maxTokens: rng.int(1, 60), oracleLength: rng.int(1, 60) }));
      for (const r of reqs) lfs.addGroup({ id: r.groupId, requests: [r] }, 0);
      const views = Array.from({ length: 1 + rng.int(0, 4) }, (_, i) => ({ name: `i${i}`, kvCapacityTokens: 200, usedKvTokens: rng.int(0, 200), active: rng.int(0, 3), maxActive: 3 }));
      const room = views.map((v) => ({ name: v.name, free: v.kvCapacityTokens - v.usedKvTokens, slots: v.maxActive - v.active }));
      const expected: { requestId: string; instance: string }[] = [];
      for (const r of [...reqs].sort((a, b) => b.oracleLength - a.oracleLength || Number(a.id.slice(1)) - Number(b.id.slice(1)))) {
        const need = r.promptTokens + Math.min(20, r.maxTokens);
        let best: (typeof room)[number] | undefined;
        for (const x of room) if (x.slots > 0 && x.free >= need && (best === undefined || x.free > best.free)) best = x;
        if (best === undefined) continue;
        best.free -= need;
        best.slots--;
        expected.push({ requestId: r.id, instance: best.name });
      }
      expect(lfs.next(views, 0).map((p) => ({ requestId: p.requestId, instance: p.instance }))).toEqual(expected);
    }
  });

  it("places starving requests first, oldest first, holding the line, whatever order they became ready in", () => {
    // As the test above, with requests ready since different times (groups added out of time order too, so the
    // scheduler cannot take its queue's order for readySince's) and a starvation bound some of them pass.
    const rng = new Rng(11);
    for (let round = 0; round < 300; round++) {
      const lfs = createOracleLfsScheduler({ chunkTokens: 20, kvAffinity: false, starvationMs: 50 });
      const ordered = rng.int(0, 1) === 0;
      let t = 0;
      const reqs = Array.from({ length: 1 + rng.int(0, 30) }, (_, i) => {
        t = ordered ? t + rng.int(0, 20) : rng.int(0, 100);
        return { id: `r${i}`, groupId: `g${i}`, index: 0, promptTokens: rng.int(1, 120), maxTokens: rng.int(1, 60), oracleLength: rng.int(1, 60), since: t };
      });
      for (const { since, ...r } of reqs) lfs.addGroup({ id: r.groupId, requests: [r] }, since);
      const now = 100 + rng.int(0, 30);
      const views = Array.from({ length: 1 + rng.int(0, 4) }, (_, i) => ({ name: `i${i}`, kvCapacityTokens: 200, usedKvTokens: rng.int(0, 200), active: rng.int(0, 3), maxActive: 3 }));
      const room = views.map((v) => ({ name: v.name, free: v.kvCapacityTokens - v.usedKvTokens, slots: v.maxActive - v.active }));
      const expected: { requestId: string; instance: string }[] = [];
      const seq = (r: { id: string }): number => Number(r.id.slice(1));
      const place = (r: (typeof reqs)[number]): boolean => {
        const need = r.promptTokens + Math.min(20, r.maxTokens);
        let best: (typeof room)[number] | undefined;
        for (const x of room) if (x.slots > 0 && x.free >= need && (best === undefined || x.free > best.free)) best = x;
        if (best === undefined) return false;
        best.free -= need;
        best.slots--;
        expected.push({ requestId: r.id, instance: best.name });
        return true;
      };
      const starving = reqs.filter((r) => now - r.since >= 50).sort((a, b) => a.since - b.since || seq(a) - seq(b));
      if (starving.every(place)) {
        for (const r of reqs.filter((x) => now - x.since < 50).sort((a, b) => b.oracleLength - a.oracleLength || seq(a) - seq(b))) {
          if (!room.some((x) => x.slots > 0)) break;
          place(r);
        }
      }
      expect(lfs.next(views, now).map((p) => ({ requestId: p.requestId, instance: p.instance }))).toEqual(expected);
    }
  });

  it("refuses a request no instance could ever hold, even while others fit", () => {
    const lfs = createOracleLfsScheduler({ chunkTokens: 10 });
    lfs.addGroup({ id: "g", requests: [{ id: "small", groupId: "g", index: 0, promptTokens: 5, maxTokens: 10, oracleLength: 5 }, { id: "huge", groupId: "g", index: 1, promptTokens: 500, maxTokens: 10, oracleLength: 1 }] }, 0);
    expect(() => lfs.next([{ name: "i0", kvCapacityTokens: 100, usedKvTokens: 0, active: 0, maxActive: 4 }], 0)).toThrow(/request huge needs 510 KV tokens for its next chunk, more than any instance holds \(100\)/);
  });
});
