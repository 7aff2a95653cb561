// A run's held-out evaluation groups (Group.heldOutVersion, loop/held-out-programs.ts) share its store id with
// its training groups; whatever reads a run's programs as its rollout (summaries, batches, exports) leaves them
// out with these.
import type { Group, Trajectory } from "../core/types.js";
import type { TrajectoryStore } from "./trajectory-store.js";

/** Whether a group is a held-out evaluation group (never trained on). */
export function isHeldOutGroup(g: Group): boolean {
  return g.heldOutVersion !== undefined;
}

/** The run's trajectories of its training groups (programs of held-out evaluation groups left out), in creation order. */
export async function trainingTrajectories(store: TrajectoryStore, runId: string): Promise<Trajectory[]> {
  return (await runTrajectories(store, runId)).training;
}

/** A run's groups and trajectories (`all`), and its trajectories of training and of held-out groups apart (each in creation order). */
export async function runTrajectories(store: TrajectoryStore, runId: string): Promise<{ groups: Group[]; all: Trajectory[]; training: Trajectory[]; heldOut: Trajectory[] }> {
  const groups = await store.listGroups(runId);
  const heldOutIds = new Set(groups.filter(isHeldOutGroup).map((g) => g.id));
  const all = await store.listTrajectories(runId);
  const training: Trajectory[] = [];
  const heldOut: Trajectory[] = [];
  for (const t of all) (heldOutIds.has(t.program.groupId) ? heldOut : training).push(t);
  return { groups, all, training, heldOut };
}
