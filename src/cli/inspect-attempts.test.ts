// arbor inspect of a resumed run: what a kill cut (an iteration's groups `it<k>`, an evaluation's `eval-v<k>`) and
// the resumed process rolled out again (Group.attempt 1, `it<k>-r1`, `eval-v<k>-r1`) is counted apart, so it blends
// into neither the rollout's aggregates nor a version's held-out mean.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Group } from "../core/types.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { summarizeStore } from "./inspect.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-inspect-attempts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("summarizeStore of a run resumed after a kill", () => {
  it("counts the cut attempts' programs apart and scores each version by its last attempt", async () => {
    const store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
    try {
      await store.createRun(fixtureRun("r"));
      const groups: [Partial<Group> & { id: string }, number][] = [
        [{ id: "r/it1/g0", iteration: 1 }, 1],
        // Iteration 2 cut by the kill (its programs recovered as aborted), then rolled out again.
        [{ id: "r/it2/g0", iteration: 2 }, 0],
        [{ id: "r/it2-r1/g0", iteration: 2, attempt: 1 }, 0.5],
        [{ id: "r/it3/g0", iteration: 3, attempt: 1 }, 0.5],
        [{ id: "r/eval-v0/g0", heldOutVersion: 0 }, 1],
        // Version 4's evaluation cut by the kill (solved so far), evaluated again after the resume (unsolved).
        [{ id: "r/eval-v4/g0", heldOutVersion: 4 }, 1],
        [{ id: "r/eval-v4-r1/g0", heldOutVersion: 4, attempt: 1 }, 0],
      ];
      for (const [fields, reward] of groups) {
        const g = { ...fixtureGroup(fields.id, "r", 2), ...fields };
        await store.createGroup(g);
        for (const [i, pid] of g.programIds.entries()) {
          await store.createProgram(fixtureProgram(g, i));
          await store.recordCall(fixtureCall(pid, 0, [-0.5]));
          await store.endProgram(pid, { kind: reward === 0 && fields.iteration === 2 ? "aborted" : "completed" }, 10);
          await store.setReward(pid, { total: reward, components: { outcome: reward } });
        }
      }
      const [run] = await summarizeStore(store);
      expect(run?.heldOutVersions).toEqual([
        { version: 0, programs: 2, meanReward: 1 },
        { version: 4, programs: 2, meanReward: 0 },
      ]);
      expect(run?.heldOut?.programs).toBe(4);
      // Iterations 1, 2 (its second attempt) and 3: the cut attempt's aborted programs are not the rollout's.
      expect(run?.stats).toMatchObject({ programs: 6, terminations: { completed: 6 } });
      expect(run?.stats.meanReward).toBeCloseTo((2 * 1 + 4 * 0.5) / 6, 12);
      expect(run?.superseded).toMatchObject({ programs: 4, calls: 4 });
      const cut = (run?.programs ?? []).filter((p) => p.superseded).map((p) => p.groupId);
      expect([...new Set(cut)]).toEqual(["r/it2/g0", "r/eval-v4/g0"]);
      // Listed in the order they ran (the starting evaluation, iteration 1, …), a cut attempt before its redo.
      expect([...new Set((run?.programs ?? []).map((p) => p.groupId))]).toEqual(["r/eval-v0/g0", "r/it1/g0", "r/it2/g0", "r/it2-r1/g0", "r/it3/g0", "r/eval-v4/g0", "r/eval-v4-r1/g0"]);
    } finally {
      await store.close();
    }
  });
});
