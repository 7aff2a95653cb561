// Rewards for a rollout whose programs end one by one: completion time is relative to the group
// and the judge is asynchronous, so a program's reward is computed once its whole group has ended.
// The rollout hands each ended program's context to `add`; the promise resolves with the reward
// when the group is complete (at once for compositions that need neither the group nor async).
import { ArborError, CapacityError } from "../core/errors.js";
import type { Group, Reward } from "../core/types.js";
import type { ComposedReward } from "./compose.js";
import type { RewardContext } from "./reward-fn.js";

interface Pending {
  programIds: readonly string[];
  ctxs: Map<string, RewardContext>;
  waiters: Map<string, { resolve: (r: Reward) => void; reject: (e: unknown) => void }>;
}

/** Collects a group's ended programs and rewards them together. */
export class GroupRewarder {
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly reward: ComposedReward,
    /** Groups waiting for programs at most (default 4096); one more is a {@link CapacityError}. */
    private readonly maxPendingGroups = 4096,
  ) {}

  /** Groups with some, not all, programs ended. */
  get pendingGroups(): number {
    return this.pending.size;
  }

  /** Add an ended program of `group`; resolves with its reward once the group's rewards are computed. */
  add(group: Pick<Group, "id" | "programIds">, ctx: RewardContext): Promise<Reward> {
    const programId = ctx.trajectory.program.id;
    if (!group.programIds.includes(programId)) {
      return Promise.reject(new ArborError(`reward: program '${programId}' is not in group '${group.id}'`, "reward"));
    }
    if (!this.reward.needsGroup && !this.reward.isAsync) {
      try {
        return Promise.resolve(this.reward.compute(ctx));
      } catch (e) {
        return Promise.reject(e);
      }
    }
    let p = this.pending.get(group.id);
    if (!p) {
      if (this.pending.size >= this.maxPendingGroups) return Promise.reject(new CapacityError("reward: groups waiting for their programs", this.maxPendingGroups));
      p = { programIds: [...group.programIds], ctxs: new Map(), waiters: new Map() };
      this.pending.set(group.id, p);
    }
    if (p.ctxs.has(programId)) return Promise.reject(new ArborError(`reward: program '${programId}' of group '${group.id}' added twice`, "reward"));
    p.ctxs.set(programId, ctx);
    const mine = new Promise<Reward>((resolve, reject) => (p as Pending).waiters.set(programId, { resolve, reject }));
    if (p.ctxs.size === p.programIds.length) {
      this.pending.delete(group.id);
      const done = p;
      this.reward.computeGroup(done.programIds.map((id) => done.ctxs.get(id) as RewardContext)).then(
        (rewards) => done.programIds.forEach((id, i) => done.waiters.get(id)?.resolve(rewards[i] as Reward)),
        (e: unknown) => done.waiters.forEach((w) => w.reject(e)),
      );
    }
    return mine;
  }
}
