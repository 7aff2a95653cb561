// A program's creation in the Postgres store: one statement in the common case (the program inserted where its
// group is its run's and task's, and appended to the group's member list), as the store's other writes are; the
// checks that name why nothing was inserted run only then. Run once per program of a rollout, before its calls.
import type { PoolClient } from "pg";
import type { Program } from "../core/types.js";
import { pgText } from "./pg-text.js";
import { Refused } from "./postgres-write-queue.js";
import { PROGRAM_COLUMNS, programRowValues, type ProgramRow } from "./store-rows.js";

/**
 * Inserts the program when its group ($3) exists with its run ($2) and task ($4), and lists it among the group's
 * members unless the group lists it already; answers how many programs it inserted (0 or 1). The member update
 * locks the group's row: programs of one group created at once by several stores append to its newest list.
 */
const INSERT_PROGRAM = `WITH inserted AS (
    INSERT INTO programs (${PROGRAM_COLUMNS})
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 FROM groups WHERE id = $3 AND run_id = $2 AND task_id = $4
    ON CONFLICT (id) DO NOTHING RETURNING id
  ), listed AS (
    UPDATE groups SET program_ids = program_ids || jsonb_build_array($1::text)
    WHERE id = $3 AND EXISTS (SELECT 1 FROM inserted) AND NOT (program_ids ? $1) RETURNING 1
  )
  SELECT count(*)::int AS n FROM inserted`;

/** Refuse unless run `runId` exists. */
export async function requireRun(c: PoolClient, runId: string, what: string): Promise<void> {
  if ((await c.query("SELECT 1 FROM runs WHERE id = $1", [runId])).rowCount === 0) throw new Refused(`${what}: unknown run '${runId}'`);
}

function sameProgram(r: ProgramRow, p: Program): boolean {
  return (
    r.run_id === p.runId &&
    r.group_id === p.groupId &&
    r.task_id === p.taskId &&
    r.sample_index === p.sampleIndex &&
    r.state === p.state &&
    r.created_at === p.createdAt &&
    r.ended_at === (p.endedAt ?? null) &&
    r.termination_kind === (p.termination?.kind ?? null) &&
    r.termination_detail === (p.termination?.detail ?? null)
  );
}

async function inserted(c: PoolClient, values: unknown[]): Promise<boolean> {
  return (await c.query<{ n: number }>(INSERT_PROGRAM, values)).rows[0]?.n === 1;
}

/** Whether `program` exists as it is (a retried create, already made); refused when its id is another program's. */
async function alreadyMade(c: PoolClient, program: Program): Promise<boolean> {
  const row = (await c.query<ProgramRow>("SELECT * FROM programs WHERE id = $1", [program.id])).rows[0];
  if (row === undefined) return false;
  if (sameProgram(row, program)) return true;
  throw new Refused(`createProgram: program '${program.id}' already exists`);
}

/**
 * Create `program` in its group. A retry of this very creation (an acknowledgement lost, or another store creating
 * it at the same moment) is done; the id taken by another program, an unknown run or group, or a group of another
 * run or task is refused, saying which.
 */
export async function insertProgram(c: PoolClient, program: Program, what: string): Promise<void> {
  const g = program.groupId;
  const values = programRowValues(program, pgText);
  if (await inserted(c, values)) return;
  // Nothing inserted: say why.
  await requireRun(c, program.runId, what);
  if (await alreadyMade(c, program)) return;
  const group = (await c.query<{ run_id: string; task_id: string }>("SELECT run_id, task_id FROM groups WHERE id = $1", [g])).rows[0];
  if (!group) throw new Refused(`${what}: unknown group '${g}'`);
  if (group.run_id !== program.runId) throw new Refused(`${what}: group '${g}' belongs to run '${group.run_id}', not '${program.runId}'`);
  if (group.task_id !== program.taskId) throw new Refused(`${what}: group '${g}' is for task '${group.task_id}', not '${program.taskId}'`);
  // The group is the program's and the id is free now: another store committed the group after the insert's
  // snapshot was taken. Insert again; an id taken meanwhile is a retry or refused as above.
  if ((await inserted(c, values)) || (await alreadyMade(c, program))) return;
  throw new Refused(`${what}: not inserted, though its group and id were checked (changed by another store meanwhile)`);
}
