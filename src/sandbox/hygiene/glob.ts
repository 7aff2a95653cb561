// Glob patterns for hygiene rules (artifact removal, allow-lists, protected paths): `**` spans
// directories, `*` and `?` stay within one path segment. Small on purpose: rules are written by us.

const cache = new Map<string, RegExp>();

/** Compile a glob to an anchored RegExp over `/`-separated paths. */
export function globToRegExp(glob: string): RegExp {
  let re = cache.get(glob);
  if (re) return re;
  let src = "";
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string;
    if (ch === "*" && glob[i + 1] === "*") {
      // "**/" matches zero or more whole directories; a trailing "**" matches everything below.
      if (glob[i + 2] === "/") {
        src += "(?:.*/)?";
        i += 2;
      } else {
        src += ".*";
        i += 1;
      }
    } else if (ch === "*") src += "[^/]*";
    else if (ch === "?") src += "[^/]";
    else src += ch.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  re = new RegExp(`^${src}$`);
  cache.set(glob, re);
  return re;
}

/** True when `path` matches any of `globs`. */
export function matchesAny(path: string, globs: readonly string[]): boolean {
  return globs.some((g) => globToRegExp(g).test(path));
}
