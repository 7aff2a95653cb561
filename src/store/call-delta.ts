// A program's calls as deltas over another of its calls (the SQLite and Postgres stores). An agent's call k resends
// the whole conversation: its prompt is call k-1's prompt and output and a few new tokens, its messages call k-1's
// and a few new ones. Stored whole, a program of n calls holds its context about n/2 times over (a 50-call SWE
// trajectory of 30k-token contexts: some 3 MB of prompt ids, most of them copies) and every recorded call writes
// all of it again. A delta row holds what its base call does not: `base_idx`, how many of the base's context tokens
// (prompt then output) and messages it starts with, then the rest. The writer takes each call over its program's
// last committed one (call-contexts.mjs; postgres-call-rows.ts); this is the reading side, which rebuilds one
// program's calls from its rows, bases in any order.
import { ArborError } from "../core/errors.js";
import type { Call, ChatMessage } from "../core/types.js";
import { callFromRow, type CallRow } from "./store-rows.js";

/** A calls row as both stores keep it: the call's own columns and its delta's. */
export interface DeltaCallRow extends CallRow {
  base_idx: number | null;
  prompt_shared: number;
  messages_shared: number;
}

/** One program's calls from its rows (ordered by index), each delta rebuilt over its base. */
export function resolveCalls(rows: readonly DeltaCallRow[]): Call[] {
  const byIdx = new Map<number, DeltaCallRow>();
  for (const r of rows) byIdx.set(r.idx, r);
  const done = new Map<number, Call>();
  const resolving = new Set<number>();
  const resolve = (r: DeltaCallRow): Call => {
    const known = done.get(r.idx);
    if (known) return known;
    const call = callFromRow(r);
    if (r.base_idx !== null) {
      const baseRow = byIdx.get(r.base_idx);
      if (baseRow === undefined || resolving.has(r.base_idx)) corrupt(r, `its base call ${r.base_idx} is ${baseRow ? "in a cycle" : "missing"}`);
      resolving.add(r.idx);
      const base = resolve(baseRow);
      resolving.delete(r.idx);
      rebuild(call, base, r);
    }
    done.set(r.idx, call);
    return call;
  };
  return rows.map(resolve);
}

/**
 * The calls of each program in `rows` (ordered by program, then index), resolved: `each` gets a program's
 * id and its calls in order.
 */
export function resolveByProgram(rows: readonly DeltaCallRow[], each: (programId: string, calls: Call[]) => void): void {
  for (let i = 0; i < rows.length; ) {
    const programId = (rows[i] as DeltaCallRow).program_id;
    let end = i;
    while (end < rows.length && (rows[end] as DeltaCallRow).program_id === programId) end++;
    each(programId, resolveCalls(rows.slice(i, end)));
    i = end;
  }
}

/** Put the base's shared prompt ids and messages in front of what the row stored. */
function rebuild(call: Call, base: Call, r: DeltaCallRow): void {
  const fromPrompt = Math.min(r.prompt_shared, base.promptTokenIds.length);
  const fromOutput = r.prompt_shared - fromPrompt;
  if (fromOutput > base.outputTokenIds.length || r.messages_shared > base.messages.length) {
    corrupt(r, `it shares more of call ${base.index} than that call holds`);
  }
  // Pushed (a packed list): JSON.stringify of a sized, holey list takes V8's slow path.
  const prompt: number[] = [];
  for (let i = 0; i < fromPrompt; i++) prompt.push(base.promptTokenIds[i] as number);
  for (let i = 0; i < fromOutput; i++) prompt.push(base.outputTokenIds[i] as number);
  for (const t of call.promptTokenIds) prompt.push(t);
  call.promptTokenIds = prompt;
  // Copies: a caller changing one call's messages must not change another's.
  const shared: ChatMessage[] = base.messages.slice(0, r.messages_shared).map((m) => structuredClone(m));
  call.messages = shared.concat(call.messages);
}

function corrupt(r: DeltaCallRow, why: string): never {
  throw new ArborError(`store: call '${r.id}' (program '${r.program_id}', index ${r.idx}) is corrupt: ${why}`, "store");
}
