// Test support: float32 → F16 / BF16 words (round to nearest even), to write half-precision
// checkpoints in tests. Production code only reads these dtypes (src/model/half-float.ts).

/** BF16 words of `values`, rounded to nearest even (NaN stays NaN). */
export function f32ToBf16(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const b = bits[i] as number;
    if ((b & 0x7fffffff) > 0x7f800000) out[i] = (b >>> 16) | 0x40;
    else out[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  return out;
}

/** F16 words of `values`, rounded to nearest even; out-of-range values become ±inf. */
export function f32ToF16(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < values.length; i++) {
    f[0] = values[i] as number;
    const x = u[0] as number;
    const sign = (x >>> 16) & 0x8000;
    const exp = (x >>> 23) & 0xff;
    const mant = x & 0x7fffff;
    if (exp === 0xff) {
      out[i] = sign | 0x7c00 | (mant ? 0x200 : 0);
      continue;
    }
    const e = exp - 127 + 15;
    if (e >= 0x1f) {
      out[i] = sign | 0x7c00;
    } else if (e <= 0) {
      if (e < -10) {
        out[i] = sign;
        continue;
      }
      const m = mant | 0x800000;
      const shift = 14 - e;
      let h = m >>> shift;
      const rem = m & ((1 << shift) - 1);
      const half = 1 << (shift - 1);
      if (rem > half || (rem === half && (h & 1))) h++;
      out[i] = sign | h;
    } else {
      let h = (e << 10) | (mant >>> 13);
      const rem = mant & 0x1fff;
      if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
      out[i] = sign | h;
    }
  }
  return out;
}
