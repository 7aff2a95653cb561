// The divided-rollout policy and the gateway's divided rollout plan with the same rules
// (src/gateway/divided/divided-plan.ts): checked here, where both may be imported.
import { describe, expect, it } from "vitest";
import { ChunkPlanner } from "../../gateway/divided/chunk-planner.js";
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
});
