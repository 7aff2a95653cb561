// In-process work queue behaviour beyond the shared contract, on a virtual clock: exact ack-wait timing, the
// duplicate window ending, the bound on messages, the drain timeout, double settlement and option checks.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import { MemoryWorkQueue } from "./memory-work-queue.js";
import type { DeadLetter, WorkMessage } from "./work-queue.js";

const flush = async () => {
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

function setUp(extra: { maxMessages?: number } = {}) {
  const clock = new VirtualClock();
  const dead: DeadLetter<number>[] = [];
  const q = MemoryWorkQueue.create<number>("jobs", {
    ackWaitMs: 1000,
    maxDeliver: 3,
    duplicateWindowMs: 5000,
    onDeadLetter: (dl) => dead.push(dl),
    ...extra,
  }, clock);
  return { clock, q, dead };
}

describe("MemoryWorkQueue", () => {
  it("redelivers exactly when the ack wait runs out, not before", async () => {
    const { clock, q } = setUp();
    await q.publish("a", 1);
    const deliveries: number[] = [];
    const c = q.consume(async (m) => {
      deliveries.push(m.delivery);
      if (m.delivery === 1) await new Promise(() => undefined);
    }, { maxInFlight: 2 });
    await flush();
    expect(deliveries).toEqual([1]);
    clock.advance(999);
    await flush();
    expect(deliveries).toEqual([1]);
    clock.advance(1);
    await flush();
    expect(deliveries).toEqual([1, 2]);
    await c.abandon();
  });

  it("accepts an id again once the duplicate window has passed", async () => {
    const { clock, q } = setUp();
    expect((await q.publish("a", 1)).duplicate).toBe(false);
    clock.advance(4999);
    expect((await q.publish("a", 2)).duplicate).toBe(true);
    clock.advance(1);
    expect((await q.publish("a", 3)).duplicate).toBe(false);
  });

  it("refuses a publish beyond maxMessages with a capacity error", async () => {
    const { q } = setUp({ maxMessages: 2 });
    await q.publish("a", 1);
    await q.publish("b", 2);
    await expect(q.publish("c", 3)).rejects.toBeInstanceOf(CapacityError);
  });

  it("close rejects after the drain timeout and leaves the message to be redelivered", async () => {
    const { clock, q } = setUp();
    await q.publish("a", 1);
    const seen: number[] = [];
    const c = q.consume(async (m) => {
      seen.push(m.delivery);
      if (m.delivery === 1) await new Promise(() => undefined);
    }, { maxInFlight: 1, drainTimeoutMs: 500 });
    await flush();
    const closing = c.close().catch((e: unknown) => e);
    clock.advance(500);
    const err = await closing;
    expect(err).toBeInstanceOf(ArborError);
    expect((err as ArborError).code).toBe("broker_drain_timeout");
    const other = q.connect().consume(async (m) => void seen.push(m.delivery), { maxInFlight: 1 });
    clock.advance(500);
    await flush();
    expect(seen).toEqual([1, 2]);
    await other.close();
  });

  it("a second settle of one delivery is reported, and the first one holds", async () => {
    const { clock, q, dead } = setUp();
    await q.publish("a", 1);
    const errors: string[] = [];
    const seen: number[] = [];
    const c = q.consume(async (m: WorkMessage<number>) => {
      seen.push(m.delivery);
      await m.ack();
      await m.nak();
    }, { maxInFlight: 1, onError: (e) => errors.push((e as ArborError).code) });
    await flush();
    clock.advance(5000);
    await flush();
    await c.close();
    expect(seen).toEqual([1]);
    expect(errors).toEqual(["broker_settled"]);
    expect(dead).toEqual([]);
  });

  it("a nak on the last delivery dead-letters instead of dropping", async () => {
    const { q, dead } = setUp();
    await q.publish("a", 1);
    const c = q.consume((m) => m.nak(), { maxInFlight: 1 });
    await flush();
    await c.close();
    expect(dead).toEqual([{ id: "a", payload: 1, deliveries: 3, reason: "nak on the last delivery (3 of 3)" }]);
  });

  it("names the bad field of its options", () => {
    const clock = new VirtualClock();
    expect(() => MemoryWorkQueue.create("q", { ackWaitMs: 0, maxDeliver: 1, duplicateWindowMs: 1 }, clock)).toThrow(/ackWaitMs/);
    expect(() => MemoryWorkQueue.create("q", { ackWaitMs: 1, maxDeliver: 0, duplicateWindowMs: 1 }, clock)).toThrow(/maxDeliver/);
    const q = MemoryWorkQueue.create("q", { ackWaitMs: 1, maxDeliver: 1, duplicateWindowMs: 1 }, clock);
    expect(() => q.consume(async () => undefined, { maxInFlight: 0 })).toThrow(/maxInFlight/);
  });
});
