// IEEE half precision (F16) and bfloat16 (BF16) decoding to float32: the dtypes Hugging Face
// checkpoints and GGUF files store weights in. Both widen exactly (every F16 and BF16 value is a
// float32 value), so a checkpoint read through here keeps its weights bit for bit.

/** Float32 values of little-endian F16 words (exact: subnormals, infinities and NaN included). */
export function f16ToF32(words: Uint16Array): Float32Array {
  const out = new Float32Array(words.length);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < words.length; i++) {
    const h = words[i] as number;
    const sign = (h & 0x8000) << 16;
    const exp = (h >> 10) & 0x1f;
    let mant = h & 0x3ff;
    if (exp === 0x1f) {
      bits[i] = sign | 0x7f800000 | (mant << 13); // inf / NaN (payload kept)
    } else if (exp !== 0) {
      bits[i] = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    } else if (mant === 0) {
      bits[i] = sign; // ±0
    } else {
      // Subnormal half: normalise into a float32 exponent.
      let e = -14;
      while ((mant & 0x400) === 0) {
        mant <<= 1;
        e--;
      }
      bits[i] = sign | ((e + 127) << 23) | ((mant & 0x3ff) << 13);
    }
  }
  return out;
}

/** Float32 values of little-endian BF16 words: a BF16 word is the top half of a float32. */
export function bf16ToF32(words: Uint16Array): Float32Array {
  const out = new Float32Array(words.length);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < words.length; i++) bits[i] = (words[i] as number) << 16;
  return out;
}
