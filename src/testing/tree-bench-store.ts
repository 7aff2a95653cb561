// Writes trajectories into a trajectory store through its public API, as a finished run: the fixture
// the tree benchmark's test reads back as "batches from a real Arbor run" (real SQLite, real codec).
import type { Group, Trajectory } from "../core/types.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";

/** Record `groups` and their `trajectories` as run `runId` (every program ended and rewarded). */
export async function writeRunToStore(store: TrajectoryStore, runId: string, groups: readonly Group[], trajectories: readonly Trajectory[]): Promise<void> {
  await store.createRun({ id: runId, name: runId, configJson: "{}", startedAt: 0 });
  const byId = new Map(trajectories.map((t) => [t.program.id, t]));
  for (const g of groups) {
    await store.createGroup({ ...g, runId, programIds: [] });
    for (const pid of g.programIds) {
      const t = byId.get(pid);
      if (!t) throw new Error(`program ${pid} of group ${g.id} has no trajectory`);
      const { termination: _t, endedAt: _e, ...program } = t.program;
      await store.createProgram({ ...program, runId, state: "active" });
      for (const c of t.calls) await store.recordCall(c);
      await store.endProgram(pid, { kind: "completed" }, 1);
      if (t.reward) await store.setReward(pid, t.reward);
    }
  }
  await store.finishRun(runId, 2);
}
