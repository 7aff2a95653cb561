// text-trunc: shorten text to a maximum length, ending with an ellipsis.

export function truncate(text, max, ellipsis = "…") {
  if (!Number.isInteger(max) || max < ellipsis.length) throw new RangeError("max must be an integer >= the ellipsis length");
  if (text.length <= max) return text;
  return text.slice(0, max - ellipsis.length) + ellipsis;
}
