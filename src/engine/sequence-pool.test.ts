import { describe, expect, it } from "vitest";
import { CapacityError } from "../core/errors.js";
import { AbortedError, SequencePool } from "./sequence-pool.js";

describe("SequencePool", () => {
  it("lends free items, then queues first-come-first-served", async () => {
    const pool = new SequencePool(["a", "b"], 2);
    const l1 = await pool.acquire();
    const l2 = await pool.acquire();
    expect([l1.item, l2.item]).toEqual(["a", "b"]);
    const order: string[] = [];
    const w1 = pool.acquire().then((l) => (order.push(`w1:${l.item}`), l));
    const w2 = pool.acquire().then((l) => (order.push(`w2:${l.item}`), l));
    expect(pool.running).toBe(2);
    expect(pool.waiting).toBe(2);
    l2.release();
    l2.release(); // idempotent: must not hand "b" out twice
    l1.release();
    await Promise.all([w1, w2]);
    expect(order).toEqual(["w1:b", "w2:a"]);
    expect(pool.waiting).toBe(0);
    expect(pool.running).toBe(2);
  });

  it("refuses beyond maxWaiting with a CapacityError", async () => {
    const pool = new SequencePool([1], 0);
    await pool.acquire();
    await expect(pool.acquire()).rejects.toBeInstanceOf(CapacityError);
    await expect(pool.acquire()).rejects.toThrow(/full \(limit 0\)/);
  });

  it("drops an aborted waiter from the line", async () => {
    const pool = new SequencePool([1], 1);
    const lease = await pool.acquire();
    const ac = new AbortController();
    const waiting = pool.acquire(ac.signal);
    ac.abort();
    await expect(waiting).rejects.toBeInstanceOf(AbortedError);
    expect(pool.waiting).toBe(0);
    lease.release();
    expect(pool.running).toBe(0);
    await expect(pool.acquire(ac.signal)).rejects.toBeInstanceOf(AbortedError);
  });

  it("fails every waiter on shutdown", async () => {
    const pool = new SequencePool([1], 3);
    await pool.acquire();
    const w = [pool.acquire(), pool.acquire()];
    pool.rejectWaiting(new Error("down"));
    for (const p of w) await expect(p).rejects.toThrow("down");
  });

  it("validates its limits", () => {
    expect(() => new SequencePool([], 0)).toThrow(/at least one/);
    expect(() => new SequencePool([1], -1)).toThrow(/maxWaiting/);
  });
});
