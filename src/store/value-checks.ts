// Checks of what a trajectory store is asked to write, before it reaches the database (SQLite or Postgres): a bad
// value fails its own write with an error naming the field and the reason, never a batch with a database error.
import { ArborError } from "../core/errors.js";
import type { Call } from "../core/types.js";
import { encodeTokenIds } from "./codec.js";
import { clientFieldsProblem } from "./store-rows.js";

function fail(message: string): never {
  throw new ArborError(message, "store");
}

/** Throws unless `v` is a non-empty string. */
export function requireString(v: unknown, field: string): void {
  if (typeof v !== "string" || v.length === 0) fail(`${field}: must be a non-empty string`);
}

/** Throws unless `v` is a finite number. */
export function requireFinite(v: unknown, field: string): void {
  if (typeof v !== "number" || !Number.isFinite(v)) fail(`${field}: must be a finite number, got ${String(v)}`);
}

/** Throws unless `v` is an integer >= 0. */
export function requireIndex(v: unknown, field: string): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) fail(`${field}: must be an integer >= 0, got ${String(v)}`);
}

/** Throws unless a group's iteration (or attempt: `field`) is absent or an integer >= 1. */
export function requireIteration(v: unknown, field = "group.iteration"): void {
  if (v !== undefined && (typeof v !== "number" || !Number.isInteger(v) || v < 1)) fail(`${field}: must be an integer >= 1, got ${String(v)}`);
}

/**
 * Throws, naming the call and field, unless `call`'s own fields can be stored: its id, index, version,
 * timings, one logprob per output token, a reset reason only with a reset, its messages objects, and the
 * client's fields. (Token ids are checked as they are encoded.)
 */
export function checkCall(call: Call): void {
  requireString(call.id, "call.id");
  requireIndex(call.index, `call '${call.id}' index`);
  requireIndex(call.policyVersion, `call '${call.id}' policyVersion`);
  requireFinite(call.timings?.start, `call '${call.id}' timings.start`);
  requireFinite(call.timings?.end, `call '${call.id}' timings.end`);
  if (call.logprobs.length !== call.outputTokenIds.length) {
    fail(`call '${call.id}': ${call.logprobs.length} logprobs for ${call.outputTokenIds.length} output tokens`);
  }
  if (call.contextResetReason !== undefined) {
    // A reason says why a reset happened: without the reset it would describe nothing.
    if (call.contextReset !== true) fail(`call '${call.id}': contextResetReason without contextReset`);
    requireString(call.contextResetReason, `call '${call.id}' contextResetReason`);
  }
  // Stored one message at a time (a call as the delta over the one before): each must be a JSON object.
  if (!Array.isArray(call.messages)) fail(`call '${call.id}' messages: must be an array`);
  const bad = call.messages.findIndex((m) => typeof m !== "object" || m === null || Array.isArray(m));
  if (bad >= 0) fail(`call '${call.id}' messages[${bad}]: must be an object, got ${JSON.stringify(call.messages[bad]) ?? String(call.messages[bad])}`);
  const clientProblem = clientFieldsProblem(call);
  if (clientProblem !== undefined) fail(clientProblem);
}

/** A call's per-token policy versions encoded (Int32 LE, one integer >= 0 per output token); null when it has none. */
export function encodeTokenVersions(call: Call): Buffer | null {
  const versions = call.tokenPolicyVersions as number[] | undefined;
  if (versions === undefined) return null;
  if (!Array.isArray(versions) || versions.length !== call.outputTokenIds.length) {
    fail(`call '${call.id}': ${Array.isArray(versions) ? versions.length : "no"} tokenPolicyVersions for ${call.outputTokenIds.length} output tokens`);
  }
  return encodeTokenIds(versions, `call '${call.id}' tokenPolicyVersions`);
}
