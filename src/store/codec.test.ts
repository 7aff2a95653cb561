// Tests of the stores' binary encodings: little-endian bytes on every machine, exact round trips, and errors
// naming the field and the position.
import { describe, expect, it } from "vitest";
import { decodeFloat64s, decodeTokenIds, encodeFloat64s, encodeTokenIds } from "./codec.js";

describe("token id and logprob encodings", () => {
  it("writes token ids as Int32 little-endian and reads them back", () => {
    expect([...encodeTokenIds([1, 256, 0x7fffffff], "f")]).toEqual([1, 0, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0x7f]);
    const ids = Array.from({ length: 2100 }, (_, i) => (i * 7919) % 151_936);
    const buf = encodeTokenIds(ids, "f");
    expect(buf.length).toBe(ids.length * 4);
    for (const i of [0, 1, 777, 2099]) expect(buf.readInt32LE(i * 4)).toBe(ids[i]);
    expect(decodeTokenIds(buf)).toEqual(ids);
    expect(decodeTokenIds(encodeTokenIds([], "f"))).toEqual([]);
  });

  it("writes logprobs as float64 little-endian, keeping -0 and -Infinity", () => {
    const values = [-0, -Infinity, -1e-300, -0.123456789012345, Number.MIN_VALUE, 0];
    const buf = encodeFloat64s(values, "f");
    values.forEach((v, i) => expect(Object.is(buf.readDoubleLE(i * 8), v)).toBe(true));
    expect([...encodeFloat64s([1], "f")]).toEqual([0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
    const back = decodeFloat64s(buf);
    values.forEach((v, i) => expect(Object.is(back[i], v)).toBe(true));
  });

  it("refuses a bad value, naming the field and its position", () => {
    expect(() => encodeTokenIds([1, 2, -1], "call 'c' promptTokenIds")).toThrow("call 'c' promptTokenIds[2]: token id must be an integer in [0, 2147483647], got -1");
    expect(() => encodeTokenIds([1.5], "ids")).toThrow("ids[0]: token id must be an integer");
    expect(() => encodeTokenIds([2 ** 31], "ids")).toThrow("ids[0]: token id must be an integer");
    expect(() => encodeFloat64s([-1, Number.NaN], "call 'c' logprobs")).toThrow("call 'c' logprobs[1]: must be a number, got NaN");
  });
});
