import { describe, expect, it } from "vitest";
import type { Group } from "../core/types.js";
import { supersededGroupIds } from "./held-out-groups.js";

const group = (id: string, taskId: string, more: Partial<Group> = {}): Group => ({ id, runId: "r", taskId, programIds: [], ...more });

describe("supersededGroupIds", () => {
  it("a sync iteration's or held-out version's earlier attempts, whatever their tasks", () => {
    const groups = [
      group("r/it1/g0", "a", { iteration: 1 }),
      group("r/it2/g0", "b", { iteration: 2 }),
      group("r/it2-r1/g0", "b", { iteration: 2, attempt: 1 }),
      group("r/eval-v1/g0", "h", { heldOutVersion: 1 }),
      group("r/eval-v1-r1/g0", "h", { heldOutVersion: 1, attempt: 1 }),
      group("r/it3/g0", "a", { iteration: 3, attempt: 1 }),
    ];
    expect([...supersededGroupIds(groups)]).toEqual(["r/it2/g0", "r/eval-v1/g0"]);
  });

  it("an async run's groups per task: the killed process's groups of the tasks the resumed one rolled out again", () => {
    const groups = [
      group("r/g0", "a"), // trained on before the kill: not rolled out again
      group("r/g1", "b"), // cut by the kill
      group("r/g2", "c"), // finished, in no batch when the kill came
      group("r/r1/g0", "b", { attempt: 1 }),
      group("r/r1/g1", "c", { attempt: 1 }),
      group("r/r1/g2", "d", { attempt: 1 }),
      group("r/r2/g0", "d", { attempt: 2 }),
    ];
    expect([...supersededGroupIds(groups)]).toEqual(["r/g1", "r/g2", "r/r1/g2"]);
    // A run never resumed supersedes nothing.
    expect(supersededGroupIds(groups.slice(0, 3)).size).toBe(0);
  });
});
