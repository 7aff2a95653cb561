// A request's tokens inside the scheduler: a Uint32Array with room after them, so that appending a sampled token
// is a store rather than an array push. Why: a simulated request's context grows to tens of thousands of tokens,
// one token per step. As a JS array it is reallocated about seven times on the way; each copy of a long one is a
// fresh large object (page faults), and each short one that survives is copied again by the young-generation
// collector (a third of the bytes surviving a scavenge in a full-scale seer-moonlight run). A typed array's
// elements live outside the collected heap and move only when its room runs out.
//
// Where a buffer's memory comes from (TokenMemory): V8 counts an ArrayBuffer as external memory and starts a full
// collection for every 64 MB of them allocated since the last one; a full-scale seer-moonlight run allocates
// hundreds of MB of token buffers and so ran 18 full collections instead of 7, 10% of its wall time (75 s against
// 68 s back to back). A SharedArrayBuffer is not counted. That suits a bounded run, not a server: a dead buffer is
// then freed only when the collector runs for other reasons, so the scheduler uses counted memory by default.

/** The most room a new buffer reserves after its tokens (64 KB); a buffer that fills up doubles. */
export const MAX_INITIAL_ROOM = 16384;

/**
 * "counted": ArrayBuffers, which the garbage collector's triggers count (the default); "uncounted":
 * SharedArrayBuffers, which they do not (a simulation: see above).
 */
export type TokenMemory = "counted" | "uncounted";

/** The largest token id a buffer holds: token ids are integers in [0, 2^32). */
export const MAX_TOKEN_ID = 0xffffffff;

/**
 * Tokens a buffer for n tokens holds: the power of two at or above n (at least 16), so that a continuation
 * handed its predecessor's buffer (adoptBuffer) often finds its room there already.
 */
function capacityFor(n: number): number {
  let c = 16;
  while (c < n) c *= 2;
  return c;
}

/** A buffer of `capacity` tokens in `memory`. */
function newBuffer(capacity: number, memory: TokenMemory): Uint32Array {
  return memory === "uncounted" ? new Uint32Array(new SharedArrayBuffer(4 * capacity)) : new Uint32Array(capacity);
}

/** A new buffer in `memory` holding `tokens`, with room for at least `room` more. */
export function bufferWithRoom(tokens: ArrayLike<number>, room: number, memory: TokenMemory = "counted"): Uint32Array {
  const buf = newBuffer(capacityFor(tokens.length + Math.max(0, room)), memory);
  if (tokens instanceof Uint32Array) buf.set(tokens);
  else for (let i = 0; i < tokens.length; i++) buf[i] = tokens[i] as number;
  return buf;
}

/**
 * A buffer for `tokens` handed over by their owner (a finished request's `tokenIds`, a view from the start of
 * its buffer): that buffer when it has room for `room` more after them, else a new one in `memory`.
 */
export function adoptBuffer(tokens: Uint32Array, room: number, memory: TokenMemory = "counted"): Uint32Array {
  if (tokens.byteOffset === 0 && tokens.buffer.byteLength / 4 - tokens.length >= room) return new Uint32Array(tokens.buffer);
  return bufferWithRoom(tokens, room, memory);
}

/** `buf`, holding `used` tokens, with room for at least one more: itself, or a copy of twice its size (same memory). */
export function grownBuffer(buf: Uint32Array, used: number): Uint32Array {
  if (used < buf.length) return buf;
  const next = newBuffer(capacityFor(2 * buf.length), buf.buffer instanceof SharedArrayBuffer ? "uncounted" : "counted");
  next.set(buf.subarray(0, used));
  return next;
}
