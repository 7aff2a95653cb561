// semver-lite: parse and compare MAJOR.MINOR.PATCH[-prerelease] versions.

export function parse(v) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$/.exec(v.trim());
  if (!m) throw new Error(`invalid version: ${v}`);
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), pre: m[4] ?? null };
}

function cmp(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** -1, 0 or 1 as a is older than, equal to or newer than b. */
export function compare(a, b) {
  const x = parse(a);
  const y = parse(b);
  for (const k of ["major", "minor", "patch"]) {
    const c = cmp(x[k], y[k]);
    if (c !== 0) return c;
  }
  // A pre-release is older than the release itself.
  if (x.pre === y.pre) return 0;
  if (x.pre === null) return 1;
  if (y.pre === null) return -1;
  return cmp(x.pre, y.pre);
}

export function sort(versions) {
  return [...versions].sort(compare);
}
