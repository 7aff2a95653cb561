import { describe, expect, it } from "vitest";
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
});
