import { describe, expect, it } from "vitest";
import { createOracleLfsScheduler } from "./oracle-lfs.js";

describe("oracle-lfs scheduler", () => {
  it("places the truly longest requests first, whatever their group or arrival", () => {
    const s = createOracleLfsScheduler({ chunkTokens: 1000 });
    const lens = [[5, 80], [40, 90, 10]];
    lens.forEach((ls, gi) =>
      s.addGroup({ id: `g${gi}`, requests: ls.map((n, i) => ({ id: `g${gi}/${i}`, groupId: `g${gi}`, index: i, promptTokens: 1, maxTokens: 100, oracleLength: n })) }, 0),
    );
    const out = s.next([{ name: "x", kvCapacityTokens: 10_000, usedKvTokens: 0, active: 0, maxActive: 5 }], 0);
    expect(out.map((p) => p.requestId)).toEqual(["g1/1", "g0/1", "g1/0", "g1/2", "g0/0"]);
  });

  it("refuses requests without a true length (evaluation only)", () => {
    const s = createOracleLfsScheduler();
    expect(() => s.addGroup({ id: "g", requests: [{ id: "g/0", groupId: "g", index: 0, promptTokens: 1, maxTokens: 10 }] }, 0)).toThrow(/g\/0 has no oracleLength/);
    expect(s.unfinished()).toBe(0);
  });
});
