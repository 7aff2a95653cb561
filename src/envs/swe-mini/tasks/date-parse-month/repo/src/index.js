// iso-day: parse and format YYYY-MM-DD calendar dates as UTC midnight.

const ISO = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Parse "YYYY-MM-DD" to a Date at UTC midnight; throws on malformed or impossible dates. */
export function parseDate(s) {
  const m = ISO.exec(s);
  if (!m) throw new Error(`invalid date: ${s}`);
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d) {
    throw new Error(`invalid date: ${s}`);
  }
  return date;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

/** Format a Date as "YYYY-MM-DD" (UTC). */
export function formatDate(date) {
  return `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`;
}

/** Whole days from a to b. */
export function daysBetween(a, b) {
  return Math.round((parseDate(b) - parseDate(a)) / 86400000);
}
