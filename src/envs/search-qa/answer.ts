// Exact-match answer checking with SQuAD-style normalisation (case, accents, punctuation, articles,
// whitespace), applied to the last "Answer: ..." line of the final message.

/** Normalise an answer for exact-match comparison. */
export function normalizeAnswer(s: string): string {
  return s
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/(\d),(?=\d{3}\b)/g, "$1")
    .replace(/[^\p{L}\p{N}\s]/gu, " ")
    .replace(/\b(a|an|the)\b/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** The text after the last "Answer:" (to the end of its line), or undefined. */
export function extractAnswer(text: string): string | undefined {
  const all = [...text.matchAll(/Answer:[ \t]*(.*)/g)];
  const last = all[all.length - 1]?.[1]?.trim();
  return last === undefined || last === "" ? undefined : last;
}
