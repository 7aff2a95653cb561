// Exact binary encodings for token ids (Int32 little-endian) and logprobs (float64 little-endian),
// so what the engine reported is what training reads back, bit for bit.
import { endianness } from "node:os";
import { ArborError } from "../core/errors.js";

/**
 * On a little-endian machine (every one Node runs on but s390x and ppc64) a typed array's bytes are the
 * encoding itself: encoders copy values into one in a single call, half the time of writing them one by one
 * (a recorded call's 2,000-token prompt: 15 → 8 µs, on the gateway's answer path).
 */
const NATIVE_LE = endianness() === "LE";

const INT32_MAX = 0x7fffffff;

/** Encode token ids as Int32 LE. Throws (naming `field` and the position) on a non-integer or out-of-range id. */
export function encodeTokenIds(ids: readonly number[], field: string): Buffer {
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i] as number;
    if (!Number.isInteger(t) || t < 0 || t > INT32_MAX) {
      throw new ArborError(`${field}[${i}]: token id must be an integer in [0, ${INT32_MAX}], got ${t}`, "store");
    }
  }
  if (NATIVE_LE) return bytesOf(new Int32Array(ids));
  const buf = Buffer.alloc(ids.length * 4);
  for (let i = 0; i < ids.length; i++) buf.writeInt32LE(ids[i] as number, i * 4);
  return buf;
}

/** The bytes of a typed array as a Buffer over its whole memory (no copy). */
function bytesOf(a: Int32Array | Float64Array): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/** Decode Int32 LE token ids. */
export function decodeTokenIds(buf: Buffer | null | undefined): number[] {
  if (!buf) return [];
  if (buf.length % 4 !== 0) throw new ArborError(`corrupt token blob: ${buf.length} bytes is not a multiple of 4`, "store");
  // Pushed, not sized up front: a sized list is holey, which JSON.stringify (an export, a trainer's request)
  // serializes at half speed.
  const out: number[] = [];
  for (let at = 0; at < buf.length; at += 4) out.push(buf.readInt32LE(at));
  return out;
}

/** Encode logprobs as float64 LE (exact, incl. -0 and -Infinity). Throws on NaN, naming `field` and the position. */
export function encodeFloat64s(values: readonly number[], field: string): Buffer {
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (typeof v !== "number" || Number.isNaN(v)) throw new ArborError(`${field}[${i}]: must be a number, got ${v}`, "store");
  }
  if (NATIVE_LE) return bytesOf(new Float64Array(values));
  const buf = Buffer.alloc(values.length * 8);
  for (let i = 0; i < values.length; i++) buf.writeDoubleLE(values[i] as number, i * 8);
  return buf;
}

/** Decode float64 LE values. */
export function decodeFloat64s(buf: Buffer | null | undefined): number[] {
  if (!buf) return [];
  if (buf.length % 8 !== 0) throw new ArborError(`corrupt float blob: ${buf.length} bytes is not a multiple of 8`, "store");
  const out: number[] = [];
  for (let at = 0; at < buf.length; at += 8) out.push(buf.readDoubleLE(at));
  return out;
}
