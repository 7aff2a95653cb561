// ini-lite: parse INI text into { section: { key: value } } (top-level keys under "").

export function parseINI(text) {
  const out = { "": {} };
  let section = "";
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith(";") || line.startsWith("#")) continue;
    const sec = /^\[(.+)\]$/.exec(line);
    if (sec) {
      section = sec[1].trim();
      out[section] ??= {};
      continue;
    }
    const eq = line.indexOf("=");
    if (eq < 0) throw new Error(`bad line: ${raw}`);
    out[section][line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return out;
}
