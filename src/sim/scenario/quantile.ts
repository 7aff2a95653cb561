// The quantile every SimReport built from end times uses (agent simulations, a real run's report): linear
// between the two nearest ranks, so p50/p90/p99 and the 101-point completion CDF agree wherever they come from.

/** The q-quantile (0..1) of ascending `sorted`, linearly interpolated between ranks; 0 for an empty list. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  const pos = q * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (pos - lo);
}
