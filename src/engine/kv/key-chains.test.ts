import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { KeyChains, NO_SLOT } from "./key-chains.js";

function chain(c: KeyChains, key: number): number[] {
  const out: number[] = [];
  for (let s = c.first(key); s !== NO_SLOT; s = c.next(s)) out.push(s);
  return out;
}

describe("KeyChains", () => {
  it("keeps the slots under a key in the order they were added, apart from other keys", () => {
    const c = new KeyChains(8);
    c.add(7, 3);
    c.add(7, 1);
    c.add(9, 2);
    c.add(7, 5);
    expect(chain(c, 7)).toEqual([3, 1, 5]);
    expect(chain(c, 9)).toEqual([2]);
    expect(chain(c, 8)).toEqual([]);
    expect([...c.keys()].sort()).toEqual([7, 9]);
  });

  it("removes the first, a middle and the last slot, and drops a key whose chain empties", () => {
    const c = new KeyChains(8);
    for (const s of [0, 1, 2, 3]) c.add(4, s);
    c.remove(4, 0);
    expect(chain(c, 4)).toEqual([1, 2, 3]);
    c.remove(4, 2);
    expect(chain(c, 4)).toEqual([1, 3]);
    c.remove(4, 3);
    expect(chain(c, 4)).toEqual([1]);
    c.remove(4, 6); // not in the chain: left alone
    expect(chain(c, 4)).toEqual([1]);
    c.remove(4, 1);
    expect(chain(c, 4)).toEqual([]);
    expect([...c.keys()]).toEqual([]);
    // A removed slot can be added again, under another key.
    c.add(5, 2);
    expect(chain(c, 5)).toEqual([2]);
  });

  it("refuses a key the table cannot hold", () => {
    const c = new KeyChains(4);
    expect(() => c.add(-1, 0)).toThrow(/key must be an integer in 0\.\.2\^31 − 1, got -1/);
    expect(() => c.add(1.5, 0)).toThrow(/got 1\.5/);
    expect(() => c.add(2 ** 31, 0)).toThrow(/got 2147483648/);
    expect(chain(c, 0)).toEqual([]);
  });

  it("grows without losing chains, and clears", () => {
    const c = new KeyChains();
    expect(c.capacity()).toBe(0);
    c.grow(2);
    c.add(1, 0);
    c.add(1, 1);
    c.grow(4);
    c.grow(3); // never lowers
    expect(c.capacity()).toBe(4);
    c.add(1, 3);
    expect(chain(c, 1)).toEqual([0, 1, 3]);
    c.clear();
    expect(chain(c, 1)).toEqual([]);
    c.add(2, 1);
    expect(chain(c, 2)).toEqual([1]);
  });

  it("agrees with a map of arrays through random adds, removes and growth (keys crowding a small table)", () => {
    const rng = new Rng(7);
    const slots = 600;
    const c = new KeyChains(40);
    const model = new Map<number, number[]>();
    const keyOf = new Map<number, number>();
    // More distinct keys than the first capacity's slots, so the table runs near its highest load and probe runs
    // meet, wrap and get holes punched in them; a few keys repeat often enough to build chains.
    const keys = [0, 1, 2, 3, 1 << 29, (1 << 30) - 1, ...Array.from({ length: 54 }, () => rng.int(0, (1 << 30) - 1))];
    for (let op = 0; op < 20_000; op++) {
      if (op === 5_000) c.grow(200);
      if (op === 10_000) c.grow(slots);
      const cap = c.capacity();
      const slot = rng.int(0, cap - 1);
      const held = keyOf.get(slot);
      if (held === undefined) {
        const key = keys[rng.int(0, keys.length - 1)] as number;
        c.add(key, slot);
        keyOf.set(slot, key);
        model.set(key, [...(model.get(key) ?? []), slot]);
      } else {
        c.remove(held, slot);
        keyOf.delete(slot);
        const rest = (model.get(held) as number[]).filter((s) => s !== slot);
        if (rest.length === 0) model.delete(held);
        else model.set(held, rest);
      }
      if (op % 97 === 0) {
        for (const key of keys) expect(chain(c, key)).toEqual(model.get(key) ?? []);
        expect([...c.keys()].sort((a, b) => a - b)).toEqual([...model.keys()].sort((a, b) => a - b));
        expect(c.size()).toBe(model.size);
      }
    }
  });
});
