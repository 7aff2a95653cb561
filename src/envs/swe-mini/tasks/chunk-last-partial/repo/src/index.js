// arr-chunk: split an array into chunks of a given size.

export function chunk(arr, size) {
  if (!Number.isInteger(size) || size < 1) throw new RangeError("size must be an integer >= 1");
  const out = [];
  for (let i = 0; i < arr.length; i += size) out.push(arr.slice(i, i + size));
  return out;
}
