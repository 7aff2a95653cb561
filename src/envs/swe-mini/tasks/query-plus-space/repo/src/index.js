// qs-mini: parse and stringify URL query strings (repeated keys become arrays).

function decode(s) {
  return decodeURIComponent(s.replace(/\+/g, " "));
}

export function parse(query) {
  const out = {};
  const q = query.startsWith("?") ? query.slice(1) : query;
  if (q === "") return out;
  for (const part of q.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const key = decode(eq < 0 ? part : part.slice(0, eq));
    const value = eq < 0 ? "" : decode(part.slice(eq + 1));
    if (key in out) out[key] = [].concat(out[key], value);
    else out[key] = value;
  }
  return out;
}

export function stringify(obj) {
  const parts = [];
  for (const [k, v] of Object.entries(obj)) {
    for (const item of [].concat(v)) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(item)}`);
  }
  return parts.join("&");
}
