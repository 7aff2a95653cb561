// stats-lite: mean, median and variance of number arrays.

export function mean(xs) {
  if (xs.length === 0) throw new RangeError("empty input");
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

export function median(xs) {
  if (xs.length === 0) throw new RangeError("empty input");
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export function variance(xs) {
  const m = mean(xs);
  return mean(xs.map((x) => (x - m) ** 2));
}
