// arbor inspect's held-out score per version: the last attempt's programs only, so an evaluation a kill cut (its
// groups `eval-v<k>`, the resumed run's `eval-v<k>-r1`) does not blend into the version's mean.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { summarizeStore } from "./inspect.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-inspect-held-out-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("summarizeStore's held-out versions", () => {
  it("scores each version by its last attempt's programs", async () => {
    const store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
    try {
      await store.createRun(fixtureRun("r"));
      // Version 0 once; version 4 cut by a kill (solved), then evaluated again after the resume (unsolved).
      for (const [id, version, reward] of [["r/eval-v0/g0", 0, 1], ["r/eval-v4/g0", 4, 1], ["r/eval-v4-r1/g0", 4, 0]] as const) {
        const g = { ...fixtureGroup(id, "r", 2), heldOutVersion: version };
        await store.createGroup(g);
        for (const [i, pid] of g.programIds.entries()) {
          await store.createProgram(fixtureProgram(g, i));
          await store.recordCall(fixtureCall(pid, 0, [-0.5]));
          await store.endProgram(pid, { kind: "completed" }, 10);
          await store.setReward(pid, { total: reward, components: { outcome: reward } });
        }
      }
      const [run] = await summarizeStore(store);
      expect(run?.heldOutVersions).toEqual([
        { version: 0, programs: 2, meanReward: 1 },
        { version: 4, programs: 2, meanReward: 0 },
      ]);
      expect(run?.heldOut?.programs).toBe(6);
    } finally {
      await store.close();
    }
  });
});
