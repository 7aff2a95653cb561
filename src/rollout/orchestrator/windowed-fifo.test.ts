import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { WindowedFifo } from "./windowed-fifo.js";

describe("windowed FIFO (Forge)", () => {
  it("takes completed items inside [head, head+W) only, and slides only as the head is consumed", () => {
    const q = new WindowedFifo<string>(3, 10);
    for (const id of ["a", "b", "c", "d", "e"]) q.push(id);
    q.complete("b", "B");
    q.complete("d", "D");
    // Window [0, 3) = a, b, c: only b is complete; d is beyond the window.
    expect(q.take(5).map((t) => t.id)).toEqual(["b"]);
    expect(q.headPosition).toBe(0); // a (the straggler) still holds the head
    expect(q.take(5)).toEqual([]);
    q.complete("a", "A");
    // a is taken, the head slides past a and b to c: window [2, 5) now reaches d.
    expect(q.take(5).map((t) => [t.id, t.position, t.value])).toEqual([["a", 0, "A"], ["d", 3, "D"]]);
    expect(q.headPosition).toBe(2);
    expect(q.size).toBe(2);
  });

  it("W = 1 is strict oldest-first; take(max) bounds the count", () => {
    const q = new WindowedFifo<number>(1, 4);
    for (const id of ["a", "b", "c"]) q.push(id);
    q.complete("c", 3);
    q.complete("b", 2);
    expect(q.take(2)).toEqual([]);
    q.complete("a", 1);
    // Taking a slides the one-item window onto b, then c: take(max) stops at max.
    expect(q.take(2).map((t) => t.id)).toEqual(["a", "b"]);
    expect(q.takeable).toBe(1);
    expect(q.take(1).map((t) => t.id)).toEqual(["c"]);
  });

  it("is bounded and refuses misuse with clear errors", () => {
    const q = new WindowedFifo<number>(2, 2);
    q.push("a");
    q.push("b");
    expect(() => q.push("c")).toThrow(/windowed FIFO \(unconsumed items\) is full \(limit 2\)/);
    expect(() => q.push("a")).toThrow(/already pushed/);
    expect(() => q.complete("zz", 1)).toThrow(/unknown or already consumed/);
    q.complete("a", 1);
    expect(() => q.complete("a", 1)).toThrow(/completed twice/);
    expect(() => new WindowedFifo(0, 1)).toThrow(/window must be an integer >= 1/);
  });

  it("never loses, duplicates or takes outside the window, for any completion order", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.nat(), { minLength: 1, maxLength: 40 }), fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: 40 }), (w, picks, takes) => {
        const n = picks.length;
        const q = new WindowedFifo<number>(w, n);
        const ids = picks.map((_, i) => `t${i}`);
        ids.forEach((id) => q.push(id));
        const open = [...ids];
        const got: string[] = [];
        for (let i = 0; i < n; i++) {
          const [id] = open.splice((picks[i] as number) % open.length, 1);
          q.complete(id as string, i);
          // One item at a time, so the window each take sees is the head before it.
          for (let k = 0; k < (takes[i] ?? 1); k++) {
            const head = q.headPosition;
            for (const t of q.take(1)) {
              expect(t.position).toBeGreaterThanOrEqual(head);
              expect(t.position).toBeLessThan(head + w);
              got.push(t.id);
            }
          }
        }
        while (q.size > 0) for (const t of q.take(n)) got.push(t.id);
        expect([...got].sort()).toEqual([...ids].sort());
      }),
      { numRuns: 200, seed: 3 },
    );
  });
});
