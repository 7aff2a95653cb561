// The length of the common prefix of two id sequences: how much of a prompt a cached or stored one already holds
// (the stores' call deltas, the simulator's prefix cache, the llama.cpp runner's kept KV, the engine's state tier).
// Plain JavaScript so that the SQLite writer thread, which runs without a TypeScript loader, imports it too
// (types: common-prefix.d.mts).

/** How many leading elements `a` and `b` (arrays or typed arrays of ids) share, at most `cap`. */
export function commonPrefix(a, b, cap = Infinity) {
  const n = Math.min(a.length, b.length, cap);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
