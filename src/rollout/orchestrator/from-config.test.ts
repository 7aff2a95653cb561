import { describe, expect, it } from "vitest";
import { parseRunConfig } from "../../core/config.js";
import { orchestratorSettings, schedulerFromConfig } from "./from-config.js";

const cfg = (rollout: unknown) => parseRunConfig({ engines: [{ name: "e0" }], rollout });

describe("rollout config → orchestrator and scheduler", () => {
  it("defaults to sync fifo-group with one batch of every task's group", () => {
    const c = cfg({});
    expect(orchestratorSettings(c.rollout, 8)).toEqual({ mode: "sync", groupSize: 4, batchGroups: 8 });
    expect(schedulerFromConfig(c.rollout).name).toBe("fifo-group");
  });

  it("carries async window, N and η, and the seer policy's options", () => {
    const c = cfg({ mode: "async", batchGroups: 4, maxInFlightGroups: 12, window: 3, maxStaleness: 2, scheduler: { policy: "seer", chunkTokens: 256 } });
    expect(orchestratorSettings(c.rollout, 100)).toEqual({ mode: "async", groupSize: 4, batchGroups: 4, maxInFlightGroups: 12, window: 3, maxStaleness: 2 });
    const s = schedulerFromConfig(c.rollout);
    expect(s.name).toBe("seer");
    s.addGroup({ id: "g", requests: [{ id: "g/0", groupId: "g", index: 0, promptTokens: 10, maxTokens: 1000 }] }, 0);
    expect(s.next([{ name: "x", kvCapacityTokens: 10_000, usedKvTokens: 0, active: 0, maxActive: 1 }], 0)[0]?.maxTokens).toBe(256);
  });

  it("names the field of a bad value, and async-only fields outside async", () => {
    expect(() => cfg({ scheduler: { policy: "lifo" } })).toThrow(/rollout\.scheduler\.policy: /);
    expect(() => cfg({ mode: "async", maxStaleness: -1 })).toThrow(/rollout\.maxStaleness: /);
    expect(() => cfg({ window: 4 })).toThrow(/rollout\.mode: window, maxInFlightGroups and maxStaleness apply to mode async only/);
  });
});
