// wordwrap-lite: greedy word wrapping to a column width.

export function wrap(text, width) {
  if (!Number.isInteger(width) || width < 1) throw new RangeError("width must be an integer >= 1");
  const lines = [];
  let line = "";
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line === "") line = word;
    else if (line.length + 1 + word.length <= width) line += " " + word;
    else {
      lines.push(line);
      line = word;
    }
  }
  if (line !== "") lines.push(line);
  return lines.join("\n");
}
