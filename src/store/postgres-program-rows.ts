// Rows about one program in the Postgres store (its calls, tool events and context events): written only while
// the program exists and has not ended, its row held against a concurrent end until the write commits. The common
// case is one statement, the insert guarded by that condition; the checks that name why run only when it inserted
// nothing.
import type { PoolClient } from "pg";
import { Refused } from "./postgres-write-queue.js";

/** The insert of a row about the program its `program_id` column names: guarded by the program being active, or plain. */
export interface ProgramRowInsert {
  ifActive: string;
  plain: string;
  /** Where the program's id is among the values. */
  programAt: number;
}

/** The inserts of `columns` (one of them `program_id`) into `table`, `tail` (e.g. ON CONFLICT ...) after each. */
export function programRowInsert(table: string, columns: readonly string[], tail = ""): ProgramRowInsert {
  const programAt = columns.indexOf("program_id");
  if (programAt < 0) throw new Error(`programRowInsert ${table}: no program_id column`);
  const into = `INSERT INTO ${table} (${columns.join(", ")})`;
  const values = columns.map((_, i) => `$${i + 1}`).join(", ");
  const end = tail === "" ? "" : ` ${tail}`;
  return {
    ifActive: `${into} SELECT ${values} WHERE EXISTS (SELECT 1 FROM programs WHERE id = $${programAt + 1} AND termination_kind IS NULL FOR SHARE)${end}`,
    plain: `${into} VALUES (${values})${end}`,
    programAt,
  };
}

/**
 * Insert `values` where their program exists and has not ended: one statement when it is active, else refused
 * naming why (or, for a program another store created since, inserted once it is seen).
 */
export async function insertForActive(c: PoolClient, insert: ProgramRowInsert, what: string, values: unknown[]): Promise<void> {
  if ((await c.query(insert.ifActive, values)).rowCount !== 0) return;
  await requireActive(c, values[insert.programAt] as string, what);
  await c.query(insert.plain, values);
}

/** Refuse unless the program exists and has not ended; holds its row against a concurrent end until commit. */
export async function requireActive(c: PoolClient, programId: string, what: string): Promise<void> {
  const r = await c.query<{ termination_kind: string | null }>("SELECT termination_kind FROM programs WHERE id = $1 FOR SHARE", [programId]);
  const row = r.rows[0];
  if (!row) throw new Refused(`${what}: unknown program '${programId}'`);
  if (row.termination_kind !== null) throw new Refused(`${what}: program '${programId}' already ended (${row.termination_kind})`);
}
