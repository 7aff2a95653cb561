import { describe, expect, it } from "vitest";
import { Rng, RngBank } from "./rng.js";

describe("Rng", () => {
  it("reproduces from its seed and differs across seeds", () => {
    const a = new Rng(42);
    const b = new Rng(42);
    const c = new Rng(43);
    const xs = Array.from({ length: 5 }, () => a.nextU32());
    expect(Array.from({ length: 5 }, () => b.nextU32())).toEqual(xs);
    expect(Array.from({ length: 5 }, () => c.nextU32())).not.toEqual(xs);
  });

  it("keeps its sequences across versions (every seeded run and simulation report depends on them)", () => {
    const r = new Rng(42);
    expect(Array.from({ length: 6 }, () => r.nextU32())).toEqual([2837322924, 544945897, 479756282, 3500138142, 339756180, 113173290]);
    const f = new Rng(7).fork("x");
    expect([f.nextU32(), f.float()]).toEqual([2847464623, 0.012187774293124676]);
  });

  it("float is in [0,1) with a mean near 0.5; int covers its inclusive range", () => {
    const r = new Rng(1);
    let sum = 0;
    const seen = new Set<number>();
    for (let i = 0; i < 20000; i++) {
      const f = r.float();
      expect(f).toBeGreaterThanOrEqual(0);
      expect(f).toBeLessThan(1);
      sum += f;
      seen.add(r.int(3, 6));
    }
    expect(sum / 20000).toBeCloseTo(0.5, 1);
    expect([...seen].sort()).toEqual([3, 4, 5, 6]);
  });

  it("categorical follows the weights", () => {
    const r = new Rng(7);
    const counts = [0, 0, 0];
    for (let i = 0; i < 30000; i++) counts[r.categorical([1, 0, 3])]! += 1;
    expect(counts[1]).toBe(0);
    expect(counts[2]! / counts[0]!).toBeGreaterThan(2.7);
    expect(counts[2]! / counts[0]!).toBeLessThan(3.3);
  });

  it("forks are independent of each other and of later parent use", () => {
    const r = new Rng(5);
    const f1 = r.fork("a").nextU32();
    r.nextU32();
    expect(r.fork("a").nextU32()).toBe(f1);
    expect(r.fork("b").nextU32()).not.toBe(f1);
  });
});

describe("RngBank", () => {
  it("draws in each slot exactly what new Rng(seed) draws, interleaved and across growth", () => {
    const bank = new RngBank();
    const seeds = Array.from({ length: 40 }, (_, i) => new Rng(9).forkSeed(`r${i}`));
    const slots = seeds.map((seed) => bank.add(seed));
    const rngs = seeds.map((seed) => new Rng(seed));
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < seeds.length; i++) {
        const slot = slots[i] as number;
        const r = rngs[i] as Rng;
        expect(bank.nextU32(slot)).toBe(r.nextU32());
        expect(bank.float(slot)).toBe(r.float());
        expect(bank.int(slot, 3, 1000)).toBe(r.int(3, 1000));
        expect(bank.pick(slot, ["a", "b", "c"])).toBe(r.pick(["a", "b", "c"]));
      }
    }
    expect(new Rng(9).fork("r3").nextU32()).toBe(new Rng(seeds[3] as number).nextU32());
  });

  it("reuses released slots, reseeded, and refuses a slot it does not hold", () => {
    const bank = new RngBank();
    const a = bank.add(1);
    const b = bank.add(2);
    bank.nextU32(a);
    bank.release(a);
    expect(bank.size()).toBe(1);
    const c = bank.add(5);
    expect(c).toBe(a);
    expect(bank.nextU32(c)).toBe(new Rng(5).nextU32());
    expect(() => bank.release(b + 1)).toThrow(/slot 2 is not held/);
    bank.release(b);
    expect(() => bank.release(b)).toThrow(/not held/);
    expect(() => bank.int(c, 5, 4)).toThrow(/lo <= hi/);
  });

  it("keeps a caller's words per slot beside each generator without changing its draws, zeroed on reuse", () => {
    const bank = new RngBank(3);
    const slots = Array.from({ length: 40 }, (_, i) => bank.add(100 + i));
    for (const [i, slot] of slots.entries()) for (let w = 0; w < 3; w++) bank.setWord(slot, w, -(i * 3 + w) - 1);
    // Draws as new Rng(seed)'s, across the growth past 16 slots; the words stay as set.
    for (const [i, slot] of slots.entries()) {
      const r = new Rng(100 + i);
      expect([bank.nextU32(slot), bank.nextU32(slot), bank.float(slot)]).toEqual([r.nextU32(), r.nextU32(), r.float()]);
    }
    for (const [i, slot] of slots.entries()) for (let w = 0; w < 3; w++) expect(bank.word(slot, w)).toBe(-(i * 3 + w) - 1);
    bank.release(slots[5] as number);
    const again = bank.add(7);
    expect(again).toBe(slots[5]);
    expect([bank.word(again, 0), bank.word(again, 1), bank.word(again, 2)]).toEqual([0, 0, 0]);
    expect(bank.nextU32(again)).toBe(new Rng(7).nextU32());
    expect(() => new RngBank(-1)).toThrow(/extraWords must be an integer >= 0/);
  });
});
