import { describe, expect, it } from "vitest";
import { createDividedFifoScheduler } from "./divided-fifo.js";

describe("divided-fifo scheduler", () => {
  it("serves requests in arrival order, chunk by chunk, each chunk on the instance with the most free KV", () => {
    const s = createDividedFifoScheduler({ chunkTokens: 50, kvAffinity: false });
    const lens = [[5, 80], [40, 90, 10]];
    lens.forEach((ls, gi) =>
      s.addGroup({ id: `g${gi}`, requests: ls.map((n, i) => ({ id: `g${gi}/${i}`, groupId: `g${gi}`, index: i, promptTokens: 1, maxTokens: 100, oracleLength: n })) }, 0),
    );
    const small = { name: "small", kvCapacityTokens: 1_000, usedKvTokens: 0, active: 0, maxActive: 5 };
    const big = { name: "big", kvCapacityTokens: 10_000, usedKvTokens: 0, active: 0, maxActive: 5 };
    const first = s.next([small, big], 0);
    // Arrival order whatever the lengths; the first placement goes where the most KV is free.
    expect(first.map((p) => p.requestId)).toEqual(["g0/0", "g0/1", "g1/0", "g1/1", "g1/2"]);
    expect(first[0]?.instance).toBe("big");
    expect(first.every((p) => p.maxTokens === 50)).toBe(true);
    // A continuation is a new chunk, placed again (no group binding): after g0/1's first chunk it goes back in line.
    s.onChunkEnd("g0/1", 50, false, 1);
    const [next] = s.next([{ ...small, usedKvTokens: 900 }, { ...big, usedKvTokens: 0 }], 1);
    expect(next).toMatchObject({ requestId: "g0/1", instance: "big", maxTokens: 50 });
  });
});
