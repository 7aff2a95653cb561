// End to end: calls recorded in the SQLite store come out of the batch builder's JSONL export with the exact
// output token ids and logprobs the engine reported.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../core/types.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { readSamplesJsonl, writeSamplesJsonl } from "./export-jsonl.js";
import { buildTrainingBatch } from "./build-batch.js";

describe("store → batch builder → JSONL", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "arbor-e2e-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps every call's output tokens and logprobs exact", async () => {
    const dbPath = join(dir, "store.sqlite");
    const recorded = new Map<string, Call>();
    const rewards: Record<string, number> = { "g1-p0": 1, "g1-p1": 0, "g1-p2": 0, "g1-p3": 1, "g2-p0": 0.5, "g2-p1": 0.5 };
    let store = new SqliteTrajectoryStore(dbPath);
    await store.createRun(fixtureRun());
    for (const g of [fixtureGroup("g1", "run-1", 4), fixtureGroup("g2", "run-1", 2)]) {
      await store.createGroup(g);
      for (const [i, id] of g.programIds.entries()) {
        await store.createProgram(fixtureProgram(g, i));
        for (let c = 0; c < i + 1; c++) {
          const call = fixtureCall(id, c, [-1e-12, -23.5, -(i + 1) / 3].slice(0, 1 + ((i + c) % 3)), 2 + c);
          await store.recordCall(call);
          recorded.set(call.id, call);
        }
        await store.endProgram(id, { kind: "completed" }, 5000);
        await store.setReward(id, { total: rewards[id] ?? NaN, components: { outcome: rewards[id] ?? NaN } });
      }
    }
    await store.close();

    store = new SqliteTrajectoryStore(dbPath);
    // Per-call samples: each call's prompt ‖ output on its own line (the run exports merged ones, same builder).
    const samples = buildTrainingBatch({ id: "b", trajectories: await store.listTrajectories("run-1"), groups: await store.listGroups("run-1"), estimator: "grpo", mode: "per-call" }).batch.samples;
    await store.close();
    const out = join(dir, "out", "batch.jsonl");
    await writeSamplesJsonl(out, samples);
    const back = await readSamplesJsonl(out);

    expect(back).toHaveLength(recorded.size);
    expect(back).toEqual(samples);
    for (const s of back) {
      expect(s.callIds).toHaveLength(1);
      const call = recorded.get(s.callIds[0]!);
      expect(call, s.id).toBeDefined();
      const first = s.lossMask.indexOf(1);
      expect(first).toBe(call?.promptTokenIds.length);
      expect(s.tokenIds.slice(0, first)).toEqual(call?.promptTokenIds);
      expect(s.tokenIds.slice(first)).toEqual(call?.outputTokenIds);
      const lp = s.oldLogprobs.slice(first);
      expect(Buffer.from(new Float64Array(lp).buffer).equals(Buffer.from(new Float64Array(call?.logprobs ?? []).buffer))).toBe(true);
      expect(s.versions.slice(first)).toEqual(call?.outputTokenIds.map(() => call.policyVersion));
    }
    // Group g2's rewards are equal: no signal. Group g1 is [1,0,0,1]: GRPO broadcasts each program's advantage.
    expect(back.filter((s) => s.groupId === "g2").every((s) => s.advantages.every((a) => a === 0))).toBe(true);
    const g1 = back.filter((s) => s.programId === "g1-p3");
    expect(g1).toHaveLength(4);
    const adv = g1.flatMap((s) => s.advantages.filter((_, i) => s.lossMask[i] === 1));
    expect(new Set(adv).size).toBe(1);
    expect(adv[0]).toBeCloseTo(0.866024, 5);
  });
});
