// Test support: the trajectories of one iteration of a sync run (a run has one store id; each of its groups
// records the iteration it was rolled out in).
import type { Trajectory } from "../core/types.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";

/** The trajectories of `runId`'s groups of iteration `k`, in the store's order. */
export async function iterationTrajectories(store: TrajectoryStore, runId: string, k: number): Promise<Trajectory[]> {
  const groups = new Set((await store.listGroups(runId)).filter((g) => g.iteration === k).map((g) => g.id));
  return (await store.listTrajectories(runId)).filter((t) => groups.has(t.program.groupId));
}
