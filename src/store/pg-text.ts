// Text that Postgres can store: a `text` value cannot hold a NUL character, which model output (a sampled
// byte token <0x00>), tool output and error details can contain. Such a string is stored as a marker (a
// private-use character) followed by its JSON encoding; every other string is stored as it is, so the tables
// stay readable. Reading reverses it for every text column (the pool's parser of type text), exactly.
import pg from "pg";

/** Starts an escaped value; a string that itself starts with it is escaped too, so decoding is exact. */
const MARK = "\uE000";

/** `s` as stored in a Postgres text column. */
export function pgText(s: string): string {
  return s.includes("\0") || s.startsWith(MARK) ? MARK + JSON.stringify(s) : s;
}

/** The string a text column holds, as written through {@link pgText}. */
export function pgTextOf(stored: string): string {
  return stored.startsWith(MARK) ? (JSON.parse(stored.slice(MARK.length)) as string) : stored;
}

/** pg's `types` option for a pool: text columns (oid 25) read through {@link pgTextOf}. */
export const PG_TEXT_TYPES = {
  getTypeParser: (oid: number, format?: "text" | "binary"): ((v: string) => unknown) => {
    return oid === 25 ? pgTextOf : (pg.types.getTypeParser(oid, format as "text") as (v: string) => unknown);
  },
};
