// End to end: calls recorded in the SQLite store come out of the JSONL batch with the exact
// output token ids and logprobs the engine reported.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../core/types.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../store/test-fixtures.js";
import { readSamplesJsonl, writeSamplesJsonl } from "./export-jsonl.js";
import { buildSamples } from "./samples.js";

describe("store → samples → JSONL", () => {
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
    const samples = buildSamples(await store.listTrajectories("run-1"), await store.listGroups("run-1"));
    await store.close();
    const out = join(dir, "out", "batch.jsonl");
    await writeSamplesJsonl(out, samples);
    const back = await readSamplesJsonl(out);

    expect(back).toHaveLength(recorded.size);
    expect(back).toEqual(samples);
    for (const s of back) {
      const call = recorded.get(s.callId);
      expect(call, s.callId).toBeDefined();
      const first = s.lossMask.indexOf(1);
      expect(first).toBe(call?.promptTokenIds.length);
      expect(s.tokenIds.slice(0, first)).toEqual(call?.promptTokenIds);
      expect(s.tokenIds.slice(first)).toEqual(call?.outputTokenIds);
      const lp = s.oldLogprobs.slice(first);
      expect(Buffer.from(new Float64Array(lp).buffer).equals(Buffer.from(new Float64Array(call?.logprobs ?? []).buffer))).toBe(true);
      expect(s.reward).toBe(rewards[s.programId]);
    }
    // Group g2's rewards are equal: no signal. Group g1 is [1,0,0,1].
    expect(back.filter((s) => s.groupId === "g2").every((s) => s.advantage === 0)).toBe(true);
    const g1 = back.filter((s) => s.programId === "g1-p3");
    expect(g1).toHaveLength(4);
    expect(new Set(g1.map((s) => s.advantage)).size).toBe(1);
    expect(g1[0]?.advantage).toBeCloseTo(0.866024, 5);
  });
});
