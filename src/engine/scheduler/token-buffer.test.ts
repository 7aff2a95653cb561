import { describe, expect, it } from "vitest";
import { adoptBuffer, bufferWithRoom, grownBuffer } from "./token-buffer.js";

describe("token buffers", () => {
  it("hold the tokens in a power of two of slots, with at least the room asked", () => {
    const a = bufferWithRoom([1, 2, 3], 10);
    expect(a.length).toBe(16);
    expect([...a.subarray(0, 3)]).toEqual([1, 2, 3]);
    const b = bufferWithRoom(new Uint32Array([4, 5]), 30);
    expect(b.length).toBe(32);
    expect([...b.subarray(0, 2)]).toEqual([4, 5]);
  });

  it("adopt a handed-over view's buffer when it has the room, else copy the view into a new one", () => {
    const buf = bufferWithRoom([1, 2, 3], 10);
    const view = buf.subarray(0, 3);
    expect(adoptBuffer(view, 13).buffer).toBe(buf.buffer);
    const copy = adoptBuffer(view, 14);
    expect(copy.buffer).not.toBe(buf.buffer);
    expect(copy.length).toBe(32);
    expect([...copy.subarray(0, 3)]).toEqual([1, 2, 3]);
    // A view from inside a buffer is copied: the tokens before it are not the request's.
    const inner = adoptBuffer(buf.subarray(1, 3), 1);
    expect(inner.buffer).not.toBe(buf.buffer);
    expect([...inner.subarray(0, 2)]).toEqual([2, 3]);
  });

  it("grow a full buffer to twice its size, keeping its tokens", () => {
    const buf = bufferWithRoom([1, 2], 14);
    expect(grownBuffer(buf, 15)).toBe(buf);
    buf.fill(3);
    const grown = grownBuffer(buf, 16);
    expect(grown.length).toBe(32);
    expect([...grown.subarray(0, 16)]).toEqual(new Array(16).fill(3));
  });

  it("in uncounted memory are SharedArrayBuffers, and stay so when grown or copied on a handover", () => {
    const buf = bufferWithRoom([1, 2, 3], 13, "uncounted");
    expect(buf.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(bufferWithRoom([1], 1).buffer).toBeInstanceOf(ArrayBuffer);
    const grown = grownBuffer(buf, 16);
    expect(grown.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect([...grown.subarray(0, 3)]).toEqual([1, 2, 3]);
    expect(grownBuffer(bufferWithRoom([1], 15), 16).buffer).toBeInstanceOf(ArrayBuffer);
    expect(adoptBuffer(buf.subarray(0, 3), 13).buffer).toBe(buf.buffer);
    expect(adoptBuffer(buf.subarray(0, 3), 14, "uncounted").buffer).toBeInstanceOf(SharedArrayBuffer);
  });
});
