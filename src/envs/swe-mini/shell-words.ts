// Splits a command line into argv the way a POSIX shell would for plain words and quotes (no
// expansion, pipes or redirection): the run tool executes argv directly, never through a shell.

/** Split `line` into words; throws on an unterminated quote. */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let cur = "";
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] as string;
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error("unterminated ' quote");
      cur += line.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (ch === '"') {
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === "\\" && /["\\$`]/.test(line[j + 1] ?? "")) j++;
        cur += line[j];
      }
      if (j >= line.length) throw new Error('unterminated " quote');
      i = j;
      inWord = true;
    } else if (ch === "\\" && i + 1 < line.length) {
      cur += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(cur);
      cur = "";
      inWord = false;
    } else {
      cur += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(cur);
  return words;
}
