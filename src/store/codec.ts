// Exact binary encodings for token ids (Int32 little-endian) and logprobs (float64 little-endian),
// so what the engine reported is what training reads back, bit for bit.
import { ArborError } from "../core/errors.js";

const INT32_MAX = 0x7fffffff;

/** Encode token ids as Int32 LE. Throws (naming `field` and the position) on a non-integer or out-of-range id. */
export function encodeTokenIds(ids: readonly number[], field: string): Buffer {
  const buf = Buffer.alloc(ids.length * 4);
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i] as number;
    if (!Number.isInteger(t) || t < 0 || t > INT32_MAX) {
      throw new ArborError(`${field}[${i}]: token id must be an integer in [0, ${INT32_MAX}], got ${t}`, "store");
    }
    buf.writeInt32LE(t, i * 4);
  }
  return buf;
}

/** Decode Int32 LE token ids. */
export function decodeTokenIds(buf: Buffer | null | undefined): number[] {
  if (!buf) return [];
  if (buf.length % 4 !== 0) throw new ArborError(`corrupt token blob: ${buf.length} bytes is not a multiple of 4`, "store");
  const out = new Array<number>(buf.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = buf.readInt32LE(i * 4);
  return out;
}

/** Encode logprobs as float64 LE (exact, incl. -0 and -Infinity). Throws on NaN, naming `field` and the position. */
export function encodeFloat64s(values: readonly number[], field: string): Buffer {
  const buf = Buffer.alloc(values.length * 8);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (typeof v !== "number" || Number.isNaN(v)) throw new ArborError(`${field}[${i}]: must be a number, got ${v}`, "store");
    buf.writeDoubleLE(v, i * 8);
  }
  return buf;
}

/** Decode float64 LE values. */
export function decodeFloat64s(buf: Buffer | null | undefined): number[] {
  if (!buf) return [];
  if (buf.length % 8 !== 0) throw new ArborError(`corrupt float blob: ${buf.length} bytes is not a multiple of 8`, "store");
  const out = new Array<number>(buf.length / 8);
  for (let i = 0; i < out.length; i++) out[i] = buf.readDoubleLE(i * 8);
  return out;
}
