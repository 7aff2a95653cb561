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
  const heldOut = new Set((await store.listGroups(runId)).filter(isHeldOutGroup).map((g) => g.id));
  return (await store.listTrajectories(runId)).filter((t) => !heldOut.has(t.program.groupId));
}
