// RoPE tables exactly as llama.cpp computes them for architecture "llama" (NORM mode): adjacent pairs
// (x[2i], x[2i+1]) of each head rotate by θ_i = pos·s^i with s = base^(−2/headDim), where llama.cpp
// builds θ_i by repeated float32 multiplication (θ ← θ·s) — mirrored with Math.fround so that the
// trainer's angles are bit-for-bit the engine's.

/** cos/sin tables laid out [n, headDim/2, 2] for `out = x·cos2 + swap(x)·sin2`. */
export interface RopeTables {
  /** (cos θ, cos θ) per pair. */
  cos2: Float32Array;
  /** (−sin θ, +sin θ) per pair: swap(x) = (x1, x0), so out0 = x0·cos − x1·sin, out1 = x1·cos + x0·sin. */
  sin2: Float32Array;
}

/** RoPE tables for the given position ids. */
export function ropeTables(positions: ArrayLike<number>, headDim: number, freqBase: number): RopeTables {
  const half = headDim / 2;
  const n = positions.length;
  const cos2 = new Float32Array(n * headDim);
  const sin2 = new Float32Array(n * headDim);
  const scale = Math.fround(Math.pow(Math.fround(freqBase), Math.fround(-2 / headDim)));
  for (let r = 0; r < n; r++) {
    let theta = Math.fround(positions[r] as number);
    for (let i = 0; i < half; i++) {
      const c = Math.fround(Math.cos(theta));
      const s = Math.fround(Math.sin(theta));
      const o = r * headDim + 2 * i;
      cos2[o] = c;
      cos2[o + 1] = c;
      sin2[o] = -s;
      sin2[o + 1] = s;
      theta = Math.fround(theta * scale);
    }
  }
  return { cos2, sin2 };
}
