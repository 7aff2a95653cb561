import { describe, expect, it } from "vitest";
import { ropeTables } from "./rope.js";

describe("ropeTables", () => {
  it("matches llama.cpp NORM mode: θ_i = pos·base^(−2i/d) built by float32 products, pairs (cos,cos)/(−sin,sin)", () => {
    const { cos2, sin2 } = ropeTables([0, 3], 4, 10000);
    expect(Array.from(cos2.slice(0, 4))).toEqual([1, 1, 1, 1]);
    expect(Array.from(sin2.slice(0, 4)).map(Math.abs)).toEqual([0, 0, 0, 0]);
    const scale = Math.fround(Math.pow(10000, -0.5));
    const t1 = Math.fround(3 * scale);
    expect(cos2[4]).toBe(Math.fround(Math.cos(3)));
    expect(sin2[5]).toBe(Math.fround(Math.sin(3)));
    expect(sin2[4]).toBe(-Math.fround(Math.sin(3)));
    expect(cos2[6]).toBe(Math.fround(Math.cos(t1)));
    expect(cos2[7]).toBe(Math.fround(Math.cos(t1)));
  });
});
