// A set that remembers the most recent `max` keys added, the oldest forgotten first: for ids a service checks
// against for as long as they can plausibly come back (a redelivered batch), in a process that runs for weeks.

/** The last `max` keys added (a key added again counts as new). */
export class RecentSet<K> {
  private readonly keys = new Set<K>();

  constructor(readonly max: number) {
    if (!(Number.isInteger(max) && max >= 1)) throw new RangeError(`RecentSet: max must be an integer >= 1, got ${max}`);
  }

  add(key: K): void {
    this.keys.delete(key);
    this.keys.add(key);
    if (this.keys.size > this.max) this.keys.delete(this.keys.values().next().value as K);
  }

  has(key: K): boolean {
    return this.keys.has(key);
  }

  get size(): number {
    return this.keys.size;
  }
}
