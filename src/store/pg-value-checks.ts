// Checks of the values the Postgres store writes, before they reach the server: a bad value fails its own
// write with an error naming the field and the reason, not the batch with a server error.
import { ArborError } from "../core/errors.js";

/** Throws unless `v` is a non-empty string. */
export function requireString(v: unknown, field: string): void {
  if (typeof v !== "string" || v.length === 0) throw new ArborError(`${field}: must be a non-empty string`, "store");
}

/** Throws unless `v` is a finite number. */
export function requireFinite(v: unknown, field: string): void {
  if (typeof v !== "number" || !Number.isFinite(v)) throw new ArborError(`${field}: must be a finite number, got ${String(v)}`, "store");
}

/** Throws unless `v` is an integer >= 0. */
export function requireIndex(v: unknown, field: string): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new ArborError(`${field}: must be an integer >= 0, got ${String(v)}`, "store");
}
