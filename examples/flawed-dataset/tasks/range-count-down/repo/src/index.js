// num-range: numeric ranges like Python's range().

export function range(start, end, step = 1) {
  if (end === undefined) [start, end] = [0, start];
  if (step === 0) throw new RangeError("step must not be 0");
  const out = [];
  if (step > 0) for (let x = start; x < end; x += step) out.push(x);
  else for (let x = start; x > end; x += step) out.push(x);
  return out;
}
