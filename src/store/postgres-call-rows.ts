// How the Postgres store writes a call: its whole content as column values (validated, naming the call and
// field), the SHA-256 of that content, and the row as stored, over the last call of its program this store
// committed (call-contexts.mjs; call-delta.ts reads it back), so that a program of n calls costs storage linear
// in n rather than quadratic. An identical retry (an acknowledgement lost, two stores recording the same call)
// is recognised by the hash, whichever form each copy was stored in; rows written before the hash existed are
// whole and compared column by column, as they were.
import { createHash } from "node:crypto";
import type { PoolClient } from "pg";
import type { Call } from "../core/types.js";
import { contextOf, deltaOver, int32s, type CallContext } from "./call-contexts.mjs";
import { encodeFloat64s, encodeTokenIds } from "./codec.js";
import { pgText } from "./pg-text.js";
import { programRowInsert } from "./postgres-program-rows.js";
import { CALL_COLUMNS } from "./store-rows.js";
import { checkCall, encodeTokenVersions } from "./value-checks.js";

/** The calls table's columns as the Postgres store writes them: a call's own, then its delta's and its hash. */
const STORED_COLUMNS = [...CALL_COLUMNS, "base_idx", "prompt_shared", "messages_shared", "content_sha"];

/**
 * Insert a stored call's values ({@link CallWrite.stored}) where its program exists and has not ended
 * (postgres-program-rows.ts) and neither its id nor its index is taken: one statement for the common case.
 * Returns its id, or no row when it was not inserted.
 */
export const INSERT_CALL = programRowInsert("calls", STORED_COLUMNS, "ON CONFLICT DO NOTHING RETURNING id").ifActive;

// The call recorded under this id: whether its content hash is this one, or it is a row from before hashes
// (`legacy`: compared whole below).
const CALL_BY_ID = "SELECT content_sha = $2 AS same, content_sha IS NULL AS legacy FROM calls WHERE id = $1";
// A row written whole, without a hash: every column equal (NULLs included).
const SAME_WHOLE_CALL = `SELECT 1 FROM calls WHERE id = $1 AND ${CALL_COLUMNS.slice(1)
  .map((c, i) => `${c} IS NOT DISTINCT FROM $${i + 2}`)
  .join(" AND ")}`;

/** One call's write: its content whole (CALL_COLUMNS order), that content's hash, the row as stored, and its context. */
export interface CallWrite {
  whole: unknown[];
  sha: Buffer;
  stored: unknown[];
  /** What the program's next call is stored over, once this one has committed. */
  context: CallContext;
}

/**
 * `call`'s write, stored over `base` (its program's last committed call, as this store knows it) where it
 * shares a prefix with it and comes after it, else whole. Throws an ArborError naming the call and field on
 * invalid content.
 */
export function callWrite(call: Call, base: CallContext | undefined): CallWrite {
  // Each message's JSON: the list's JSON is them joined, and the delta compares them one by one.
  const messages = call.messages.map((m) => JSON.stringify(m));
  const whole = callValues(call, `[${messages.join(",")}]`);
  const prompt = int32s(whole[4] as Buffer);
  const d = deltaOver(base !== undefined && base.index < call.index ? base : undefined, prompt, messages);
  const sha = contentSha(whole);
  const stored = whole.slice();
  stored[3] = d.messagesRest;
  stored[4] = Buffer.from(d.promptRest.buffer, d.promptRest.byteOffset, d.promptRest.byteLength);
  stored.push(d.baseIdx, d.promptShared, d.messagesShared, sha);
  return { whole, sha, stored, context: contextOf(call.index, prompt, int32s(whole[5] as Buffer), messages) };
}

/**
 * What is recorded under `w`'s call id: "same" (this call, in whatever form either copy is stored), "other" (a
 * call with other content), or undefined (nothing).
 */
export async function recordedAs(c: PoolClient, w: CallWrite): Promise<"same" | "other" | undefined> {
  const row = (await c.query<{ same: boolean | null; legacy: boolean }>(CALL_BY_ID, [w.whole[0], w.sha])).rows[0];
  if (row === undefined) return undefined;
  const same = row.legacy ? (await c.query(SAME_WHOLE_CALL, w.whole)).rowCount !== 0 : row.same === true;
  return same ? "same" : "other";
}

/** SHA-256 of column values: each tagged with its kind and length, so no two lists of values share an encoding. */
export function contentSha(values: readonly unknown[]): Buffer {
  const h = createHash("sha256");
  for (const v of values) {
    if (v === null) h.update("n;");
    else if (Buffer.isBuffer(v)) h.update(`b${v.length};`).update(v);
    else if (typeof v === "string") h.update(`s${Buffer.byteLength(v)};`).update(v);
    else h.update(`${typeof v}:${String(v)};`);
  }
  return h.digest();
}

/** A call's column values in {@link CALL_COLUMNS} order (messages as `messagesJson`), validated (naming the call and field). */
function callValues(call: Call, messagesJson: string): unknown[] {
  checkCall(call);
  const versions = encodeTokenVersions(call);
  return [
    call.id,
    call.programId,
    call.index,
    messagesJson,
    encodeTokenIds(call.promptTokenIds, `call '${call.id}' promptTokenIds`),
    encodeTokenIds(call.outputTokenIds, `call '${call.id}' outputTokenIds`),
    encodeFloat64s(call.logprobs, `call '${call.id}' logprobs`),
    pgText(call.outputText),
    call.finishReason,
    call.backend,
    call.policyVersion,
    call.timings.start,
    call.timings.end,
    call.trainable !== false,
    call.contextReset === true,
    versions,
    call.servedModel ?? null,
    call.contextResetReason ?? null,
    call.requestedModel ?? null,
    call.maxTokensClamped?.asked ?? null,
    call.maxTokensClamped?.granted ?? null,
  ];
}
