// Test driver of a plain rollout iteration: every task gets a group of n programs, run with the production
// runProgram/rewardProgram (src/rollout/sync-rollout.ts) under a concurrency limit; resolves when every program
// has a recorded outcome. Production runs go through the orchestrator (src/rollout/async-rollout.ts) instead.
import type { Group } from "../core/types.js";
import type { Task } from "../envs/env.js";
import { Semaphore } from "../rollout/semaphore.js";
import { rewardProgram, runProgram, type ProgramResult, type RolloutOptions } from "../rollout/sync-rollout.js";

/** Run one synchronous rollout iteration; resolves when every program has a recorded outcome. */
export async function runSyncRollout(o: RolloutOptions): Promise<{ groups: Group[]; results: ProgramResult[] }> {
  const groups: Group[] = o.tasks.map((task, gi) => ({
    id: `${o.runId}/g${gi}`,
    runId: o.runId,
    taskId: task.id,
    programIds: Array.from({ length: o.groupSize }, (_, si) => `${o.runId}/g${gi}/s${si}`),
  }));
  // Issued together: the store applies them in order (and commits them in one transaction).
  await Promise.all(groups.map((g) => o.store.createGroup(g)));

  const sem = new Semaphore(o.concurrency);
  const results: ProgramResult[] = [];
  const jobs = groups.flatMap((g, gi) =>
    g.programIds.map((programId, si) =>
      sem
        .with(() => runProgram(o, o.tasks[gi] as Task, g, programId, si))
        .then(async (ended) => {
          const r = await rewardProgram(o, g, ended);
          results.push(r);
          o.onProgramDone?.(r);
        }),
    ),
  );
  const settled = await Promise.allSettled(jobs);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) throw failed.reason;
  return { groups, results };
}
