// A run's held-out evaluation groups (Group.heldOutVersion, loop/held-out-programs.ts) share its store id with
// its training groups; whatever reads a run's programs as its rollout (summaries, batches, exports) leaves them
// out with these. So too the groups of an iteration a kill cut, which the resumed run rolled out again (a later
// Group.attempt of the same iteration): no batch holds them.
import type { Group, Trajectory } from "../core/types.js";
import type { TrajectoryStore } from "./trajectory-store.js";

/** Whether a group is a held-out evaluation group (never trained on). */
export function isHeldOutGroup(g: Group): boolean {
  return g.heldOutVersion !== undefined;
}

/**
 * The ids of the groups superseded by a later attempt: an iteration's (or a held-out version's) groups of every
 * attempt but its last. An async run's groups (no iteration) count per task: a resumed async run rolls out again
 * exactly the tasks its killed process had not trained on (admitted, cut or finished but in no batch), so a task's
 * group of an earlier attempt is superseded where a later attempt has one.
 */
export function supersededGroupIds(groups: readonly Group[]): Set<string> {
  const keyOf = (g: Group): string => (g.heldOutVersion !== undefined ? `v${g.heldOutVersion}` : g.iteration !== undefined ? `it${g.iteration}` : `task:${g.taskId}`);
  const last = new Map<string, number>();
  for (const g of groups) {
    const k = keyOf(g);
    last.set(k, Math.max(last.get(k) ?? 0, g.attempt ?? 0));
  }
  return new Set(groups.filter((g) => (g.attempt ?? 0) < (last.get(keyOf(g)) ?? 0)).map((g) => g.id));
}

/** The run's trajectories of its training groups (held-out and superseded groups' programs left out), in creation order. */
export async function trainingTrajectories(store: TrajectoryStore, runId: string): Promise<Trajectory[]> {
  return (await runTrajectories(store, runId)).training;
}

/** A run's trajectories split by what their groups are (each part in creation order). */
export interface RunTrajectories {
  groups: Group[];
  all: Trajectory[];
  /** Of training groups, their iteration's last attempt. */
  training: Trajectory[];
  /** Of held-out evaluation groups, their version's last attempt. */
  heldOut: Trajectory[];
  /** Of groups a later attempt superseded (training or held-out): what a kill cut and the resumed run did again. */
  superseded: Trajectory[];
}

/** A run's groups and trajectories, split into training, held-out and superseded ones. */
export async function runTrajectories(store: TrajectoryStore, runId: string): Promise<RunTrajectories> {
  const groups = await store.listGroups(runId);
  const heldOutIds = new Set(groups.filter(isHeldOutGroup).map((g) => g.id));
  const supersededIds = supersededGroupIds(groups);
  const all = await store.listTrajectories(runId);
  const out: RunTrajectories = { groups, all, training: [], heldOut: [], superseded: [] };
  for (const t of all) {
    const g = t.program.groupId;
    (supersededIds.has(g) ? out.superseded : heldOutIds.has(g) ? out.heldOut : out.training).push(t);
  }
  return out;
}
